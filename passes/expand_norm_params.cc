#include "passes/expand_norm_params.h"

#include <string>
#include <vector>

namespace ampc::passes {
namespace {

// The normalised shape of a LayerNormalization whose input has a static shape; empty when
// unknown or when the axis is out of range (legalize refuses that node later).
std::vector<int64_t> normalised_shape(const ir::Node& n) {
  const ir::Value* x = n.inputs.empty() ? nullptr : n.inputs[0];
  if (!x || !x->type.is_static()) return {};
  const std::vector<int64_t>& dims = *x->type.shape;
  const auto rank = static_cast<int64_t>(dims.size());
  const ir::Attribute* a = n.attr("axis");
  int64_t axis = a ? a->i : -1;
  if (axis < -rank || axis >= rank) return {};
  if (axis < 0) axis += rank;
  return {dims.begin() + axis, dims.end()};
}

ir::Value* shape_constant(ir::Graph& g, const std::string& name,
                          const std::vector<int64_t>& shape) {
  ir::Tensor t = ir::tensor_of<int32_t>(DType::kInt64, DType::kInt64,
                                        {static_cast<int64_t>(shape.size())}, shape);
  ir::Value* v = g.add_value(name, {DType::kInt64, t.dims});
  t.name = v->name;
  v->initializer = std::make_unique<ir::Tensor>(std::move(t));
  g.initializers.push_back(v);
  return v;
}

// Expands node n's scale and bias where they broadcast; returns how many it expanded.
// `serial` numbers the new values apart from those of earlier nodes.
int expand_operands(ir::Graph& g, ir::Node* n, int serial) {
  const std::vector<int64_t> shape = normalised_shape(*n);
  int expanded = 0;
  for (int k = 1; !shape.empty() && k <= 2 && k < static_cast<int>(n->inputs.size()); ++k) {
    ir::Value* p = n->inputs[k];
    if (!p || !p->type.is_static() || *p->type.shape == shape ||
        p->type.shape->size() > shape.size())
      continue;
    const std::string base = "ampc_expand_norm" + std::to_string(serial + expanded) + "_" + p->name;
    ir::Value* full = g.add_value(base, {p->type.dtype, shape});
    g.insert_node_before(n, "Expand", {p, shape_constant(g, base + "_shape", shape)}, {full}, base);
    ir::set_input(n, k, full);
    ++expanded;
  }
  return expanded;
}

}  // namespace

int expand_norm_params(ir::Model& model) {
  std::vector<ir::Node*> norms;  // collected first: expanding inserts nodes
  for (const auto& n : model.graph->nodes) {
    if (n->op_type == "LayerNormalization" && n->domain.empty()) norms.push_back(n.get());
  }
  int inserted = 0;
  for (ir::Node* n : norms) inserted += expand_operands(*model.graph, n, inserted);
  return inserted;
}

}  // namespace ampc::passes
