#include "passes/optimizer.h"

#include <fnmatch.h>

#include <map>

#include "base/error.h"
#include "passes/autodiff/grad_builder.h"

namespace ampc::passes {
namespace {

using autodiff::GradBuilder;
using ir::Value;

// A state initializer of the given type, zero or filled with `value`.
Value* state(GradBuilder& b, ir::Model& model, const std::string& name, double value,
             const ir::TensorType& type) {
  if (model.graph->find_value(name))
    throw Error("cannot add optimizer state '" + name + "': the name is taken");
  Value* v = b.filled(value, type);
  model.graph->rename_value(v, name);
  v->initializer->name = name;
  return v;
}

// Records `target <- source`, or `target <- Where(skip, target, source)` when the step
// may be skipped: Where copies the old bits unchanged, whatever the new value (inf, NaN).
struct Updates {
  ir::Model& model;
  GradBuilder& b;
  Value* skip;
  void add(Value* target, Value* source) {
    if (skip) source = b.op("Where", {skip, target, source}, target->type);
    model.state_updates.push_back({target, source});
  }
};

struct Ops {
  GradBuilder& b;
  Value* mul(Value* x, Value* y) { return b.op("Mul", {x, y}, x->type); }
  Value* add(Value* x, Value* y) { return b.op("Add", {x, y}, x->type); }
  Value* sub(Value* x, Value* y) { return b.op("Sub", {x, y}, x->type); }
  Value* div(Value* x, Value* y) { return b.op("Div", {x, y}, x->type); }
  Value* sqrt(Value* x) { return b.op("Sqrt", {x}, x->type); }
  Value* c(double v, DType t) { return b.scalar(v, t); }
};

void sgd(ir::Model& model, GradBuilder& b, Updates& u, Value* lr, const ParameterGradient& pg,
         OptimizerOptions o) {
  Ops f{b};
  Value* p = pg.parameter;
  const DType t = p->type.dtype;
  Value* d = pg.gradient;
  if (o.weight_decay != 0) d = f.add(d, f.mul(p, f.c(o.weight_decay, t)));
  if (o.momentum != 0) {
    // buf = momentum * buf + d (dampening 0; the zero-initialised buffer makes the first
    // step buf = d, as torch's clone does).
    Value* buf = state(b, model, p->name + ".momentum_buffer", 0.0, p->type);
    Value* buf_new = f.add(f.mul(buf, f.c(o.momentum, t)), d);
    u.add(buf, buf_new);
    d = o.nesterov ? f.add(d, f.mul(buf_new, f.c(o.momentum, t))) : buf_new;
  }
  u.add(p, f.sub(p, f.mul(d, lr)));
}

void adam(ir::Model& model, GradBuilder& b, Updates& u, Value* lr, Value* step,
          const ParameterGradient& pg, OptimizerOptions o) {
  Ops f{b};
  Value* p = pg.parameter;
  const DType t = p->type.dtype;
  Value* g = pg.gradient;
  const bool decoupled = o.kind == "adamw";
  Value* p0 = p;
  if (o.weight_decay != 0) {
    if (decoupled) {  // p *= 1 - lr * wd
      p0 = f.mul(p, f.sub(f.c(1.0, t), f.mul(lr, f.c(o.weight_decay, t))));
    } else {
      g = f.add(g, f.mul(p, f.c(o.weight_decay, t)));
    }
  }
  Value* m = state(b, model, p->name + ".exp_avg", 0.0, p->type);
  Value* v = state(b, model, p->name + ".exp_avg_sq", 0.0, p->type);
  Value* m_new = f.add(f.mul(m, f.c(o.beta1, t)), f.mul(g, f.c(1 - o.beta1, t)));
  Value* v_new = f.add(f.mul(v, f.c(o.beta2, t)), f.mul(f.mul(g, g), f.c(1 - o.beta2, t)));
  // Bias corrections from the step counter after its increment.
  Value* bc1 = f.sub(f.c(1.0, t), b.op("Pow", {f.c(o.beta1, t), step}, step->type));
  Value* bc2 = f.sub(f.c(1.0, t), b.op("Pow", {f.c(o.beta2, t), step}, step->type));
  Value* denom = f.add(f.div(f.sqrt(v_new), f.sqrt(bc2)), f.c(o.eps, t));
  Value* update = f.mul(f.div(m_new, denom), f.div(lr, bc1));
  u.add(m, m_new);
  u.add(v, v_new);
  u.add(p, f.sub(p0, update));
}

bool matches(const std::string& pattern, const std::string& name) {
  return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

// A parameter's group: its options (weight decay 0 under --no-decay) and its lr (the
// step's lr times its --lr-mult factor; one Mul per distinct factor).
struct Groups {
  GradBuilder& b;
  const OptimizerOptions& o;
  Value* lr;
  std::map<double, Value*> scaled;

  OptimizerOptions options_of(const std::string& name) const {
    OptimizerOptions p = o;
    for (const auto& pattern : o.no_decay) {
      if (matches(pattern, name)) p.weight_decay = 0;
    }
    return p;
  }
  Value* lr_of(const std::string& name) {
    for (const auto& [pattern, factor] : o.lr_mult) {
      if (!matches(pattern, name)) continue;
      if (factor == 1.0) return lr;
      Value*& v = scaled[factor];
      if (!v) v = b.op("Mul", {lr, b.scalar(factor, lr->type.dtype)}, lr->type);
      return v;
    }
    return lr;
  }
};

// A pattern of --no-decay or --lr-mult that names no parameter is most likely a typo.
void check_patterns(const std::vector<ParameterGradient>& gradients, const OptimizerOptions& o) {
  auto used = [&](const std::string& pattern) {
    for (const auto& pg : gradients) {
      if (matches(pattern, pg.parameter->name)) return true;
    }
    return false;
  };
  for (const auto& p : o.no_decay) {
    if (!used(p)) throw Error("--no-decay '" + p + "' matches no trained parameter");
  }
  for (const auto& [p, f] : o.lr_mult) {
    if (!used(p)) throw Error("--lr-mult '" + p + "' matches no trained parameter");
    if (!(f >= 0)) throw Error("--lr-mult '" + p + "': the factor must be at least 0");
  }
}

}  // namespace

void add_optimizer(ir::Model& model, const std::vector<ParameterGradient>& gradients,
                   const OptimizerOptions& o, Value* skip, Value* advance) {
  if (o.kind != "sgd" && o.kind != "adam" && o.kind != "adamw") {
    throw Error("--optimizer " + o.kind + ": expected sgd, adam or adamw");
  }
  if (gradients.empty())
    throw Error("the loss depends on no trainable parameter: nothing to optimize");
  check_lr_schedule(o.schedule);
  check_patterns(gradients, o);
  GradBuilder b(*model.graph, "optimizer");
  Updates u{model, b, skip};
  for (const auto& pg : gradients) {
    if (pg.parameter->type.dtype != DType::kFloat32 &&
        pg.parameter->type.dtype != DType::kFloat64) {
      throw Error("parameter '" + pg.parameter->name + "' is " + pg.parameter->type.str() +
                  "; parameters must be fp32 (or fp64) masters");
    }
  }
  const DType t = gradients[0].parameter->type.dtype;
  Value* lr = state(b, model, kLrName, o.lr, {t, std::vector<int64_t>{}});
  if (o.schedule.active()) lr = add_lr_schedule(model, b, lr, o.schedule, advance);
  Groups groups{b, o, lr, {}};
  if (o.kind == "sgd") {
    for (const auto& pg : gradients) {
      const std::string& name = pg.parameter->name;
      sgd(model, b, u, groups.lr_of(name), pg, groups.options_of(name));
    }
    return;
  }
  // The step counter advances once per optimizer step (PyTorch keeps one per parameter;
  // they are always equal).
  Value* step = state(b, model, "optimizer.step", 0.0, {t, std::vector<int64_t>{}});
  Value* step_new = b.op("Add", {step, b.scalar(1.0, t)}, step->type);
  u.add(step, step_new);
  for (const auto& pg : gradients) {
    const std::string& name = pg.parameter->name;
    adam(model, b, u, groups.lr_of(name), step_new, pg, groups.options_of(name));
  }
}

}  // namespace ampc::passes
