#include "passes/broadcast_expands.h"

#include <optional>
#include <vector>

#include "ir/node_match.h"
#include "ops/op_info.h"
#include "passes/dead_code_elimination.h"

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;
using Shape = std::vector<int64_t>;

// Numpy broadcasting of two shapes; nothing where they do not broadcast.
std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t k = 1; k <= out.size(); ++k) {
    const int64_t da = k <= a.size() ? a[a.size() - k] : 1;
    const int64_t db = k <= b.size() ? b[b.size() - k] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[out.size() - k] = da == 1 ? db : da;
  }
  return out;
}

// Whether `n` broadcasts every operand numpy's way (ONNX's elementwise ops from opset 7; older
// ones broadcast by attributes).
bool broadcasts_operands(const ir::Model& model, const Node& n) {
  if (!n.domain.empty() || n.outputs.size() != 1 || !n.outputs[0] || !n.attributes.empty())
    return false;
  if (model.opset_version("").value_or(0) < 7) return false;
  using F = ops::FusedForm;
  switch (ops::op_info(n.domain, n.op_type).fused) {
    case F::kArith:
    case F::kPow:
    case F::kVariadic:
    case F::kCompare:
    case F::kLogic:
    case F::kWhere:
    case F::kPRelu:
      return true;
    default:
      return false;
  }
}

// The shape `n`'s output has with input `k` read as `v`; nothing where an operand is not static
// or the shapes do not broadcast.
std::optional<Shape> output_shape_with(const Node& n, size_t k, const Value* v) {
  Shape out;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value* in = i == k ? v : n.inputs[i];
    if (!in || !in->type.is_static()) return std::nullopt;
    const auto b = broadcast(out, *in->type.shape);
    if (!b) return std::nullopt;
    out = *b;
  }
  return out;
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
    if (reader.owner != e->owner || !broadcasts_operands(model, reader)) continue;
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
  for (Node* e : expands) rewritten += bypass(model, e);
  if (rewritten > 0) eliminate_dead_code(model);
  return rewritten;
}

}  // namespace ampc::passes
