#include "compiler/plan_emit.h"

#include <set>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "passes/gemm_epilogue.h"

namespace ampc::compiler {
namespace {

void tensor_data(const ir::Tensor& t, plan::TensorData* out) {
  out->set_dtype(static_cast<int32_t>(t.dtype));
  for (int64_t d : t.dims) out->add_dims(d);
  if (t.dtype == DType::kString) {
    for (const auto& s : t.strings) out->add_strings(s);
  } else {
    out->set_data(t.bytes.data(), t.bytes.size());
  }
}

void attribute(const ir::Attribute& a, const ir::Node& n, plan::Attribute* out) {
  out->set_name(a.name);
  switch (a.kind) {
    case ir::AttrKind::kInt:
      out->set_i(a.i);
      break;
    case ir::AttrKind::kFloat:
      out->set_f(a.f);
      break;
    case ir::AttrKind::kString:
      out->set_s(a.s);
      break;
    case ir::AttrKind::kInts:
      for (int64_t v : a.ints) out->mutable_ints()->add_v(v);
      break;
    case ir::AttrKind::kFloats:
      for (float v : a.floats) out->mutable_floats()->add_v(v);
      break;
    case ir::AttrKind::kStrings:
      for (const auto& v : a.strings) out->mutable_strings()->add_v(v);
      break;
    case ir::AttrKind::kTensor:
      tensor_data(a.t, out->mutable_t());
      break;
    case ir::AttrKind::kGraph:
    case ir::AttrKind::kGraphs:
      throw Error("node " + n.label() +
                  ": operators with subgraphs (control flow) are not supported by the plan yet");
    case ir::AttrKind::kTensors:
      throw Error("node " + n.label() + ": attribute '" + a.name +
                  "' (a list of tensors) is not supported");
  }
}

std::string node_name(const ir::Node& n, size_t index) {
  return n.name.empty() ? "#" + std::to_string(index) : n.name;
}

// Plan.precision_decisions: autocast's decision for each node still in the graph. The report
// names nodes by Node::label() and Casts by name; unnamed nodes are left out, as their label
// ("#index") may have changed since autocast ran.
void record_precision(const ir::Graph& g, const passes::AutocastReport& report, plan::Plan& p) {
  std::unordered_map<std::string, const passes::AutocastReport::NodeDecision*> decided;
  for (const auto& d : report.nodes) decided[d.node] = &d;
  std::unordered_map<std::string, const passes::AutocastReport::InsertedCast*> casts;
  for (const auto& c : report.casts) casts[c.node] = &c;
  for (const auto& n : g.nodes) {
    if (n->name.empty()) continue;
    auto add = [&](DType dtype, const std::string& rule) {
      auto* d = p.add_precision_decisions();
      d->set_node(n->name);
      d->set_compute_dtype(static_cast<int32_t>(dtype));
      d->set_rule(rule);
    };
    if (auto it = decided.find(n->label()); it != decided.end()) {
      add(it->second->compute_dtype, it->second->rule);
    } else if (auto c = casts.find(n->name); c != casts.end() && n->op_type == "Cast") {
      add(c->second->to, "cast inserted by autocast");
    }
  }
}

}  // namespace

plan::Plan emit_plan(const ir::Model& model, const EmitOptions& options) {
  const ir::Graph& g = *model.graph;
  plan::Plan p;
  p.set_producer("ampc 0.1.0");
  p.set_model_name(options.model_name);
  for (const auto& [k, v] : options.recorded_options) {
    auto* o = p.add_options();
    o->set_key(k);
    o->set_value(v);
  }

  // Values computed and consumed inside one fused kernel get no buffer.
  std::unordered_set<const ir::Value*> internal;
  if (options.lowering) {
    // Likewise what passes between a GEMM and the work folded into its call.
    for (const auto& f : options.lowering->folds) {
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
    for (const auto& step : options.lowering->steps) {
      std::unordered_set<const ir::Value*> stored;
      for (const auto& k : step.segments) stored.insert(k.outputs.begin(), k.outputs.end());
      for (const ir::Node* n : step.sources) {
        for (const ir::Value* v : n->outputs) {
          if (v && !stored.count(v)) internal.insert(v);
        }
      }
    }
  }

  std::unordered_map<const ir::Value*, int> id;
  auto add_buffer = [&](const ir::Value* v, plan::BufferRole role) {
    auto* b = p.add_buffers();
    b->set_id(p.buffers_size() - 1);
    b->set_name(v->name);
    b->set_dtype(static_cast<int32_t>(v->type.dtype));
    b->set_shape_known(v->type.is_static());
    if (v->type.is_static()) {
      for (int64_t d : *v->type.shape) b->add_shape(d);
    }
    b->set_role(role);
    if (v->initializer) tensor_data(*v->initializer, b->mutable_initial());
    id[v] = b->id();
  };
  for (const ir::Value* v : g.inputs) {
    if (!v->is_initializer()) add_buffer(v, plan::INPUT);
  }
  std::set<const ir::Value*> state;
  for (const auto& u : model.state_updates) state.insert(u.target);
  for (const ir::Value* v : g.initializers)
    add_buffer(v, state.count(v) ? plan::STATE : plan::CONSTANT);
  for (const auto& vp : g.values) {
    const ir::Value* v = vp.get();
    if (id.count(v) || internal.count(v)) continue;
    bool is_output = false;
    for (const ir::Value* o : g.outputs) is_output |= (o == v);
    add_buffer(v, is_output ? plan::OUTPUT : plan::ACTIVATION);
  }

  std::unordered_map<const ir::Node*, size_t> position;
  for (size_t i = 0; i < g.nodes.size(); ++i) position[g.nodes[i].get()] = i;
  auto add_node_step = [&](const ir::Node& n, const passes::GemmFold* fold) {
    auto* s = p.add_steps();
    s->set_op(n.op_type);
    s->set_domain(n.domain);
    s->set_opset_version(model.opset_version(n.domain).value_or(0));
    const std::vector<const ir::Value*> inputs =
        fold ? fold->inputs : std::vector<const ir::Value*>(n.inputs.begin(), n.inputs.end());
    const std::vector<const ir::Value*> outputs =
        fold ? fold->outputs : std::vector<const ir::Value*>(n.outputs.begin(), n.outputs.end());
    for (const ir::Value* v : inputs) s->add_inputs(v ? id.at(v) : -1);
    for (const ir::Value* v : outputs) s->add_outputs(v ? id.at(v) : -1);
    s->add_source_nodes(node_name(n, position.at(&n)));
    for (const auto& a : n.attributes) attribute(a, n, s->add_attributes());
    if (!fold) return;
    // What the GEMM call does besides (passes/gemm_epilogue.h), and the nodes that was.
    s->set_epilogue(fold->epilogue);
    for (const auto& [flag, on] : {std::pair{passes::kTransAAttr, fold->trans_a},
                                   std::pair{passes::kTransBAttr, fold->trans_b}}) {
      if (!on) continue;
      auto* a = s->add_attributes();
      a->set_name(flag);
      a->set_i(1);
    }
    for (const ir::Node* f : fold->folded) s->add_source_nodes(node_name(*f, position.at(f)));
  };
  if (!options.lowering) {
    for (const auto& n : g.nodes) add_node_step(*n, nullptr);
  } else {
    for (const auto& k : options.lowering->kernels) *p.add_kernels() = k;
    for (const auto& step : options.lowering->steps) {
      if (step.node) {
        add_node_step(*step.node,
                      step.fold >= 0 ? &options.lowering->folds.at(step.fold) : nullptr);
        continue;
      }
      auto* s = p.add_steps();
      s->set_op(kFusedOp);
      s->set_domain(kKernelDomain);
      s->set_kernel(options.lowering->kernels.at(step.kernel).name());
      for (const auto& k : step.segments) {
        for (const ir::Value* v : k.inputs) s->add_inputs(id.at(v));
        for (const ir::Value* v : k.outputs) s->add_outputs(id.at(v));
      }
      if (step.segments.size() > 1) s->set_segments(static_cast<int32_t>(step.segments.size()));
      for (const ir::Node* n : step.sources) s->add_source_nodes(node_name(*n, position.at(n)));
      // A guarded kernel writes its outputs into the state they update.
      for (const auto& [out, state] : step.aliases)
        p.mutable_buffers(id.at(out))->set_alias_of(1 + id.at(state));
    }
  }
  for (const ir::Value* v : g.inputs) {
    if (v->is_initializer()) continue;
    auto* b = p.add_inputs();
    b->set_name(v->name);
    b->set_buffer(id.at(v));
  }
  for (const auto& u : model.state_updates) {
    auto* su = p.add_state_updates();
    su->set_state(id.at(u.target));
    su->set_source(id.at(u.source));
  }
  for (const ir::Value* v : g.outputs) {
    auto* b = p.add_outputs();
    b->set_name(v->name);
    b->set_buffer(id.at(v));
  }
  if (options.autocast) record_precision(g, *options.autocast, p);
  return p;
}

}  // namespace ampc::compiler
