#include "lower/kernel_builder.h"

#include <cmath>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/error.h"
#include "ops/op_info.h"

namespace ampc::lower {
namespace {

using ir::Node;
using ir::Value;
using kernels::Instr;
using kernels::KernelDef;

int code(DType t) {
  return static_cast<int>(t);
}

bool is_16bit(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The value of a one-element initializer as a double (exact for every kernel type); nullopt
// for NaN, whose payload a `const` would not keep.
std::optional<double> scalar_value(const ir::Tensor& t) {
  if (t.dtype == DType::kBool) return t.bytes[0] != 0 ? 1.0 : 0.0;
  const std::optional<double> v = ir::float_scalar(t);
  if (!v || std::isnan(*v)) return std::nullopt;
  return v;
}

// Merges neighbouring dimensions of a shaped kernel's iteration space that every broadcast
// operand walks linearly (its stride along the outer one is the inner one's extent times its
// stride there, zeros included) and drops dimensions of size 1. The host loop runs along rows
// of the innermost dimension and works out the broadcast operands' offsets (a division per
// dimension) once per row; an [N, C, H, W] kernel with a per-channel operand then has rows of
// H * W, not W (MobileNet's 2x2 maps: rows of 2, and the offsets cost more than the sums).
void collapse_iteration_space(KernelDef& def) {
  if (def.flat() || def.shape_size() < 2) return;
  std::vector<kernels::Operand*> broadcast;
  for (auto& op : *def.mutable_inputs()) {
    if (op.strides_size() > 0) broadcast.push_back(&op);
  }
  const int rank = def.shape_size();
  // Groups from the innermost outwards: extent, and each broadcast operand's stride.
  std::vector<int64_t> extent;
  std::vector<std::vector<int64_t>> stride(broadcast.size());
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t n = def.shape(d);
    if (n == 1 && !(extent.empty() && d == 0)) continue;
    bool linear = !extent.empty();
    for (size_t j = 0; j < broadcast.size() && linear; ++j) {
      linear = broadcast[j]->strides(d) == stride[j].back() * extent.back();
    }
    if (linear) {
      extent.back() *= n;
      continue;
    }
    extent.push_back(n);
    for (size_t j = 0; j < broadcast.size(); ++j) stride[j].push_back(broadcast[j]->strides(d));
  }
  def.clear_shape();
  for (auto it = extent.rbegin(); it != extent.rend(); ++it) def.add_shape(*it);
  for (size_t j = 0; j < broadcast.size(); ++j) {
    broadcast[j]->clear_strides();
    for (auto it = stride[j].rbegin(); it != stride[j].rend(); ++it) broadcast[j]->add_strides(*it);
  }
}

class Emitter {
 public:
  Emitter(const FusionGroup& group, const std::unordered_set<const Value*>& state,
          LoweredKernel& out)
      : group_(group), state_(state), out_(out), def_(out.def) {}

  void run() {
    def_.set_flat(group_.flat);
    if (!group_.flat) {
      for (int64_t d : group_.shape) def_.add_shape(d);
    }
    // A guarded Where stores its `new` operand: the guard decides whether anything is
    // written at all (FusionGroup::guard).
    std::unordered_map<const Value*, const Value*> guarded;
    if (group_.guard) {
      for (const Value* o : group_.outputs) guarded[o] = o->producer->inputs[2];
    }
    for (const Node* n : group_.nodes) {
      const Value* out = n->outputs[0];
      auto g = guarded.find(out);
      instr_[out] = g != guarded.end() ? value(g->second) : emit(*n);
    }
    for (const Value* o : group_.outputs) {
      def_.add_outputs(instr_.at(o));
      out_.outputs.push_back(o);
    }
    if (group_.guard) def_.set_guard(1 + operand(group_.guard));
    collapse_iteration_space(def_);
  }

 private:
  int add(const std::string& op, DType dtype, std::vector<int> args) {
    Instr* in = def_.add_body();
    in->set_op(op);
    in->set_dtype(code(dtype));
    for (int a : args) in->add_args(a);
    return def_.body_size() - 1;
  }

  int constant(double v, DType dtype) {
    const int i = add("const", dtype, {});
    def_.mutable_body(i)->set_value(v);
    return i;
  }

  // Index of v among the kernel's inputs, added on first use.
  int operand(const Value* v) {
    for (size_t j = 0; j < out_.inputs.size(); ++j) {
      if (out_.inputs[j] == v) return static_cast<int>(j);
    }
    auto* op = def_.add_inputs();
    op->set_dtype(code(v->type.dtype));
    const auto& shape = *v->type.shape;
    const int64_t n = numel(shape);
    if (n == 1) {
      op->set_scalar(true);
    } else if (n != numel(group_.shape)) {
      // Broadcast: the operand's row-major strides, right-aligned, 0 along size-1 dimensions.
      std::vector<int64_t> strides(group_.shape.size(), 0);
      int64_t stride = 1;
      for (size_t k = 1; k <= shape.size(); ++k) {
        const int64_t d = shape[shape.size() - k];
        if (d != 1) strides[group_.shape.size() - k] = stride;
        stride *= d;
      }
      for (int64_t s : strides) op->add_strides(s);
    }
    out_.inputs.push_back(v);
    return static_cast<int>(out_.inputs.size()) - 1;
  }

  // The instruction computing v: a member's result, a constant, or a load of an input.
  int value(const Value* v) {
    if (auto it = instr_.find(v); it != instr_.end()) return it->second;
    int i = -1;
    const bool constant_data =
        v->initializer && !v->is_graph_input && !state_.count(v) && v->initializer->numel() == 1;
    if (auto c = constant_data ? scalar_value(*v->initializer) : std::nullopt) {
      i = constant(*c, v->type.dtype);
    } else {
      const int j = operand(v);
      i = add("load", v->type.dtype, {});
      def_.mutable_body(i)->set_operand(j);
    }
    instr_[v] = i;
    return i;
  }

  [[noreturn]] void refuse(const Node& n) {
    throw Error("node " + n.label() + ": operator '" + n.op_type +
                "' cannot be compiled into a fused kernel");
  }

  // Sum, Mean, Max, Min: accumulated in opmath and rounded once, as the CPU's variadic ops.
  int variadic(const Node& n, DType t) {
    const bool sum = n.op_type == "Sum" || n.op_type == "Mean";
    const std::string op = sum ? "add" : (n.op_type == "Max" ? "max" : "min");
    const size_t count = n.inputs.size();
    if (count == 1 && n.op_type != "Mean") return value(n.inputs[0]);
    if (count == 2 && n.op_type != "Mean")
      return add(op, t, {value(n.inputs[0]), value(n.inputs[1])});
    // Max and Min of 16-bit values are exact, so only sums need the wider accumulator.
    const DType acc_t = sum && is_16bit(t) ? DType::kFloat32 : t;
    auto widened = [&](size_t k) {
      const int x = value(n.inputs[k]);
      return acc_t == t ? x : add("cast", acc_t, {x});
    };
    int acc = widened(0);
    for (size_t k = 1; k < count; ++k) acc = add(op, acc_t, {acc, widened(k)});
    if (n.op_type == "Mean")
      acc = add("div", acc_t, {acc, constant(static_cast<double>(count), acc_t)});
    return acc_t == t ? acc : add("cast", t, {acc});
  }

  // HardSigmoid max(0, min(1, alpha * x + beta)) and HardSwish x * max(0, min(1, x / 6 + 0.5))
  // as the CPU ops compute them (runtime/cpu/ops/elementwise_math.cc): every operation in the
  // opmath type (fp32 for 16-bit x), one rounding at the end, and std::min(1, t) /
  // std::max(0, t) with the constant first (clamp_max(1, t) is t < 1 ? t : 1, so a NaN t gives 1
  // there, as on the CPU).
  int hard_activation(const Node& n, DType t) {
    const DType m = is_16bit(t) ? DType::kFloat32 : t;
    int x = value(n.inputs[0]);
    if (m != t) x = add("cast", m, {x});
    int u;
    if (n.op_type == "HardSigmoid") {
      const ir::Attribute* alpha = n.attr("alpha");
      const ir::Attribute* beta = n.attr("beta");
      u = add("mul", m, {constant(alpha ? alpha->f : 0.2f, m), x});
      u = add("add", m, {u, constant(beta ? beta->f : 0.5f, m)});
    } else {
      u = add("add", m, {add("div", m, {x, constant(6, m)}), constant(0.5, m)});
    }
    u = add("clamp_min", m, {constant(0, m), add("clamp_max", m, {constant(1, m), u})});
    if (n.op_type == "HardSwish") u = add("mul", m, {x, u});
    return m == t ? u : add("cast", t, {u});
  }

  // The other activations of torch.nn, each the CPU op's expression
  // (runtime/cpu/ops/elementwise_math.cc, PRelu's in elementwise_binary.cc) in the opmath type,
  // rounded once: both sides of a choice are computed and one is selected.
  int activation(const Node& n, DType t) {
    const DType m = is_16bit(t) ? DType::kFloat32 : t;
    auto widened = [&](const Value* v) {
      const int x = value(v);
      return m == t ? x : add("cast", m, {x});
    };
    const int x = widened(n.inputs[0]);
    const std::string& op = n.op_type;
    auto attr = [&](const char* name, float fallback) {
      const ir::Attribute* a = n.attr(name);
      return constant(a ? a->f : fallback, m);
    };
    auto select = [&](const char* compare, int bound, int then, int otherwise) {
      return add("where", m, {add(compare, DType::kBool, {x, bound}), then, otherwise});
    };
    const int zero = constant(0, m);
    int y;
    if (op == "LeakyRelu") {  // x < 0 ? alpha x : x
      y = select("less", zero, add("mul", m, {attr("alpha", 0.01f), x}), x);
    } else if (op == "PRelu") {  // x < 0 ? slope x : x
      y = select("less", zero, add("mul", m, {widened(n.inputs[1]), x}), x);
    } else if (op == "ThresholdedRelu") {  // x > alpha ? x : 0
      y = select("greater", attr("alpha", 1.0f), x, zero);
    } else if (op == "Softsign") {  // x / (1 + |x|)
      y = add("div", m, {x, add("add", m, {constant(1, m), add("abs", m, {x})})});
    } else if (op == "Elu") {  // x < 0 ? alpha expm1(x) : x
      y = select("less", zero, add("mul", m, {attr("alpha", 1.0f), add("expm1", m, {x})}), x);
    } else if (op == "Celu") {  // max(0, x) + min(0, alpha expm1(x / alpha))
      const int alpha = attr("alpha", 1.0f);
      const int e = add("mul", m, {alpha, add("expm1", m, {add("div", m, {x, alpha})})});
      y = add("add", m, {add("clamp_min", m, {zero, x}), add("clamp_max", m, {zero, e})});
    } else if (op == "Selu") {  // x <= 0 ? gamma (alpha exp(x) - alpha) : gamma x
      const int alpha = attr("alpha", 1.67326319217681884765625f);
      const int gamma = attr("gamma", 1.05070102214813232421875f);
      const int neg = add("sub", m, {add("mul", m, {alpha, add("exp", m, {x})}), alpha});
      y = select("less_equal", zero, add("mul", m, {gamma, neg}), add("mul", m, {gamma, x}));
    } else if (op == "Softplus") {  // x > 0 ? x + log1p(exp(-x)) : log1p(exp(x))
      const int pos = add("add", m, {x, add("log1p", m, {add("exp", m, {add("neg", m, {x})})})});
      y = select("greater", zero, pos, add("log1p", m, {add("exp", m, {x})}));
    } else {
      refuse(n);
    }
    return m == t ? y : add("cast", t, {y});
  }

  int emit(const Node& n) {
    const DType out = n.outputs[0]->type.dtype;
    const std::string& op = n.op_type;
    if (op == "Identity") return value(n.inputs[0]);
    if (op == "Cast") {
      const int x = value(n.inputs[0]);
      return n.inputs[0]->type.dtype == out ? x : add("cast", out, {x});
    }
    if (op == "Sum" || op == "Mean" || op == "Max" || op == "Min")
      return variadic(n, n.inputs[0]->type.dtype);
    if (op == "HardSigmoid" || op == "HardSwish") return hard_activation(n, out);
    const ops::FusedForm form = ops::op_info(n.domain, op).fused;
    if (form == ops::FusedForm::kActivation || form == ops::FusedForm::kPRelu)
      return activation(n, out);
    if (op == "Clip") {  // the CPU op's min(max(x, lo), hi), each bound only when given
      int x = value(n.inputs[0]);
      if (n.inputs.size() > 1 && n.inputs[1]) x = add("clamp_min", out, {x, value(n.inputs[1])});
      if (n.inputs.size() > 2 && n.inputs[2]) x = add("clamp_max", out, {x, value(n.inputs[2])});
      return x;
    }
    // Every other fused op is one kernel instruction (ops/op_table.cc).
    const std::string_view instruction = ops::op_info(n.domain, op).instruction;
    if (instruction.empty()) refuse(n);
    std::vector<int> args;
    for (const Value* v : n.inputs) args.push_back(value(v));
    const int i = add(std::string(instruction), out, args);
    if (op == "IsInf") {
      const ir::Attribute* pos = n.attr("detect_positive");
      const ir::Attribute* neg = n.attr("detect_negative");
      def_.mutable_body(i)->add_iattrs(pos ? pos->i : 1);
      def_.mutable_body(i)->add_iattrs(neg ? neg->i : 1);
    }
    return i;
  }

  const FusionGroup& group_;
  const std::unordered_set<const Value*>& state_;
  LoweredKernel& out_;
  KernelDef& def_;
  std::unordered_map<const Value*, int> instr_;
};

}  // namespace

KernelBuilder::KernelBuilder(const ir::Model& model) {
  for (const auto& u : model.state_updates) state_.insert(u.target);
}

LoweredKernel KernelBuilder::build(const FusionGroup& group) const {
  LoweredKernel k;
  Emitter(group, state_, k).run();
  return k;
}

}  // namespace ampc::lower
