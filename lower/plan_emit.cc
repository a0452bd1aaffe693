#include "lower/plan_emit.h"

#include <set>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "lower/gemm_epilogue.h"
#include "lower/plan_convert.h"

namespace ampc::lower {
namespace {

std::string node_name(const ir::Node& n, size_t index) {
  return n.name.empty() ? "#" + std::to_string(index) : n.name;
}

// ir::Phase and plan::StepPhase list the same phases in the same order.
plan::StepPhase step_phase(ir::Phase phase) {
  static_assert(static_cast<int>(ir::Phase::kForward) == plan::FORWARD &&
                static_cast<int>(ir::Phase::kBackward) == plan::BACKWARD &&
                static_cast<int>(ir::Phase::kLossScaling) == plan::LOSS_SCALING &&
                static_cast<int>(ir::Phase::kOptimizer) == plan::OPTIMIZER &&
                static_cast<int>(ir::Phase::kStatistics) == plan::STATISTICS &&
                static_cast<int>(ir::Phase::kUnknown) == plan::PHASE_UNSPECIFIED);
  return static_cast<plan::StepPhase>(phase);
}

// Values that get no buffer: those computed and consumed inside one fused kernel, and what
// passes between a GEMM and the work folded into its call.
std::unordered_set<const ir::Value*> internal_values(const Lowering& lowering) {
  std::unordered_set<const ir::Value*> internal;
  for (const auto& f : lowering.folds) {
    std::unordered_set<const ir::Value*> kept(f.outputs.begin(), f.outputs.end());
    for (const ir::Node* n : f.folded) {
      for (const ir::Value* v : n->outputs) {
        if (v && !kept.count(v)) internal.insert(v);
      }
    }
    for (const ir::Value* v : f.gemm->outputs) {
      if (v && !kept.count(v)) internal.insert(v);
    }
  }
  for (const auto& step : lowering.steps) {
    std::unordered_set<const ir::Value*> stored;
    for (const auto& k : step.segments) stored.insert(k.outputs.begin(), k.outputs.end());
    for (const ir::Node* n : step.sources) {
      for (const ir::Value* v : n->outputs) {
        if (v && !stored.count(v)) internal.insert(v);
      }
    }
  }
  return internal;
}

// One emission: buffers for the graph's values, then the steps, then the bindings.
class Emitter {
 public:
  Emitter(const ir::Model& model, plan::Plan& p) : model_(model), g_(*model.graph), p_(p) {
    for (size_t i = 0; i < g_.nodes.size(); ++i) position_[g_.nodes[i].get()] = i;
  }

  void add_buffers(const std::unordered_set<const ir::Value*>& internal) {
    for (const ir::Value* v : g_.inputs) {
      if (!v->is_initializer()) add_buffer(v, plan::INPUT);
    }
    std::set<const ir::Value*> state;
    for (const auto& u : model_.state_updates) state.insert(u.target);
    for (const ir::Value* v : g_.initializers)
      add_buffer(v, state.count(v) ? plan::STATE : plan::CONSTANT);
    const std::set<const ir::Value*> outputs(g_.outputs.begin(), g_.outputs.end());
    for (const auto& vp : g_.values) {
      const ir::Value* v = vp.get();
      if (id_.count(v) || internal.count(v)) continue;
      add_buffer(v, outputs.count(v) ? plan::OUTPUT : plan::ACTIVATION);
    }
  }

  // A node as a step of its own; with `fold`, a GEMM and the work folded into its call.
  void add_node_step(const ir::Node& n, const GemmFold* fold) {
    auto* s = p_.add_steps();
    s->set_op(n.op_type);
    s->set_domain(n.domain);
    s->set_opset_version(model_.opset_version(n.domain).value_or(0));
    const std::vector<const ir::Value*> inputs =
        fold ? fold->inputs : std::vector<const ir::Value*>(n.inputs.begin(), n.inputs.end());
    const std::vector<const ir::Value*> outputs =
        fold ? fold->outputs : std::vector<const ir::Value*>(n.outputs.begin(), n.outputs.end());
    for (const ir::Value* v : inputs) s->add_inputs(v ? id_.at(v) : -1);
    for (const ir::Value* v : outputs) s->add_outputs(v ? id_.at(v) : -1);
    add_source(s, n);
    for (const auto& a : n.attributes) plan_attribute(a, n, s->add_attributes());
    legalize_with_values(*s, inputs);
    if (!fold) return;
    // What the GEMM call does besides (lower/gemm_epilogue.h), and the nodes that was.
    plan::GemmParams* g = s->mutable_gemm();
    g->set_trans_a(g->trans_a() != fold->trans_a);
    g->set_trans_b(g->trans_b() != fold->trans_b);
    g->set_epilogue(fold->epilogue);
    g->mutable_perm_a()->Assign(fold->perm_a.begin(), fold->perm_a.end());
    g->mutable_perm_b()->Assign(fold->perm_b.begin(), fold->perm_b.end());
    g->mutable_perm_y()->Assign(fold->perm_y.begin(), fold->perm_y.end());
    for (const ir::Node* f : fold->folded) add_source(s, *f);
  }

  void add_fused_step(const LoweredStep& step, const std::string& kernel) {
    auto* s = p_.add_steps();
    s->set_op(kFusedOp);
    s->set_domain(kKernelDomain);
    s->set_kernel(kernel);
    for (const auto& k : step.segments) {
      for (const ir::Value* v : k.inputs) s->add_inputs(id_.at(v));
      for (const ir::Value* v : k.outputs) s->add_outputs(id_.at(v));
    }
    if (step.segments.size() > 1) s->set_segments(static_cast<int32_t>(step.segments.size()));
    for (const ir::Node* n : step.sources) add_source(s, *n);
    // A guarded kernel writes its outputs into the state they update.
    for (const auto& [out, state] : step.aliases)
      p_.mutable_buffers(id_.at(out))->set_alias_of(1 + id_.at(state));
  }

  // Inputs, state updates and outputs by buffer id.
  void add_bindings() {
    for (const ir::Value* v : g_.inputs) {
      if (v->is_initializer()) continue;
      auto* b = p_.add_inputs();
      b->set_name(v->name);
      b->set_buffer(id_.at(v));
    }
    for (const auto& u : model_.state_updates) {
      auto* su = p_.add_state_updates();
      su->set_state(id_.at(u.target));
      su->set_source(id_.at(u.source));
    }
    for (const auto& c : model_.rounded_copies) {
      plan::Buffer* copy = p_.mutable_buffers(id_.at(c.copy));
      copy->set_copy_of(1 + id_.at(c.master));
      copy->clear_initial();  // the backends round the master's (state_copies.h)
    }
    for (const ir::Value* v : g_.outputs) {
      auto* b = p_.add_outputs();
      b->set_name(v->name);
      b->set_buffer(id_.at(v));
    }
  }

 private:
  void add_buffer(const ir::Value* v, plan::BufferRole role) {
    auto* b = p_.add_buffers();
    b->set_id(p_.buffers_size() - 1);
    b->set_name(v->name);
    b->set_dtype(static_cast<int32_t>(v->type.dtype));
    b->set_shape_known(v->type.is_static());
    if (v->type.is_static()) {
      for (int64_t d : *v->type.shape) b->add_shape(d);
    }
    b->set_role(role);
    b->set_from_model(v->from_model);
    if (v->initializer) plan_tensor_data(*v->initializer, b->mutable_initial());
    id_[v] = b->id();
  }

  void add_source(plan::Step* s, const ir::Node& n) {
    s->add_source_nodes(node_name(n, position_.at(&n)));
    s->add_source_phases(step_phase(n.phase));
  }

  const ir::Model& model_;
  const ir::Graph& g_;
  plan::Plan& p_;
  std::unordered_map<const ir::Value*, int> id_;
  std::unordered_map<const ir::Node*, size_t> position_;
};

}  // namespace

plan::Plan emit_plan(const ir::Model& model, const EmitOptions& options) {
  plan::Plan p;
  p.set_producer("ampc 0.1.0");
  p.set_model_name(options.model_name);
  for (const auto& [k, v] : options.recorded_options) {
    auto* o = p.add_options();
    o->set_key(k);
    o->set_value(v);
  }
  Emitter emitter(model, p);
  const Lowering* lowering = options.lowering;
  emitter.add_buffers(lowering ? internal_values(*lowering)
                               : std::unordered_set<const ir::Value*>{});
  if (!lowering) {
    for (const auto& n : model.graph->nodes) emitter.add_node_step(*n, nullptr);
  } else {
    for (const auto& k : lowering->kernels) *p.add_kernels() = k;
    for (const auto& step : lowering->steps) {
      if (step.node)
        emitter.add_node_step(*step.node,
                              step.fold >= 0 ? &lowering->folds.at(step.fold) : nullptr);
      else
        emitter.add_fused_step(step, lowering->kernels.at(step.kernel).name());
    }
  }
  emitter.add_bindings();
  if (options.training) *p.mutable_training() = *options.training;
  return p;
}

}  // namespace ampc::lower
