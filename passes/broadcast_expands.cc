#include "passes/broadcast_expands.h"

#include <optional>
#include <set>
#include <vector>

#include "ir/node_match.h"
#include "kernels/cpu/broadcast.h"
#include "ops/op_info.h"
#include "passes/dead_code_elimination.h"

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;
using kernels::cpu::Shape;

// Whether `n` broadcasts its operand `k` numpy's way: ONNX's binary elementwise ops and Where from
// opset 7, the variadic Max, Min, Sum and Mean from opset 8 (before: by attributes, or not at
// all), PRelu its slope only (its X fixes the output's shape).
bool broadcasts_operand(const ir::Model& model, const Node& n, int k) {
  if (!n.domain.empty() || n.outputs.size() != 1 || !n.outputs[0] || !n.attributes.empty())
    return false;
  const int64_t opset = model.opset_version("").value_or(0);
  using F = ops::FusedForm;
  switch (ops::op_info(n.domain, n.op_type).fused) {
    case F::kArith:
    case F::kPow:
    case F::kCompare:
    case F::kLogic:
    case F::kWhere:
      return opset >= 7;
    case F::kVariadic:
      return opset >= 8;
    case F::kPRelu:
      return opset >= 7 && k == 1;
    default:
      return false;
  }
}

// The shape `n`'s output has with input `k` read as `v`; nothing where an operand is not static
// or the shapes do not broadcast.
std::optional<Shape> output_shape_with(const Node& n, size_t k, const Value* v) {
  std::vector<Shape> shapes;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value* in = i == k ? v : n.inputs[i];
    if (!in || !in->type.is_static()) return std::nullopt;
    shapes.push_back(*in->type.shape);
  }
  return kernels::cpu::broadcast_shapes(shapes);
}

bool is_static_expand(const Node* n) {
  return ir::is_onnx_op(n, "Expand") && n->inputs.size() == 2 && n->inputs[0] &&
         n->inputs[0]->type.is_static() && n->outputs.size() == 1 && n->outputs[0] &&
         n->outputs[0]->type.is_static() && n->inputs[0]->type.dtype == n->outputs[0]->type.dtype;
}

// Points the readers of Expand `e` that broadcast by themselves at its input; returns how many.
int bypass(const ir::Model& model, Node* e) {
  Value* small = e->inputs[0];
  const std::vector<ir::Use> uses = e->outputs[0]->uses;
  int rewritten = 0;
  for (const ir::Use& u : uses) {
    const Node& reader = *u.node;
    if (reader.owner != e->owner || !broadcasts_operand(model, reader, u.input_index)) continue;
    const Value* y = reader.outputs[0];
    if (!y->type.is_static()) continue;
    const auto shape = output_shape_with(reader, static_cast<size_t>(u.input_index), small);
    if (!shape || *shape != *y->type.shape) continue;
    ir::replace_use(u, small);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace

int read_expands_as_broadcasts(ir::Model& model) {
  int rewritten = 0;
  std::vector<Node*> expands;
  for (const auto& n : model.graph->nodes) {
    if (is_static_expand(n.get())) expands.push_back(n.get());
  }
  // The Expands left unread go (the pipeline's dead-code pass then drops their shape
  // constants); a graph output's or a state update's stays.
  const std::set<const Value*> kept = kept_values(model);
  std::vector<Node*> unread;
  for (Node* e : expands) {
    rewritten += bypass(model, e);
    if (e->outputs[0]->uses.empty() && !kept.count(e->outputs[0])) unread.push_back(e);
  }
  model.graph->remove_nodes(unread);
  return rewritten;
}

}  // namespace ampc::passes
