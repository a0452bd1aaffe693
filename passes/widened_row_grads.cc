#include "passes/widened_row_grads.h"

#include <set>
#include <vector>

#include "ops/schemas/ampc_schemas.h"
#include "passes/dead_code_elimination.h"
#include "passes/widening_cast.h"

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;

// A row op's backward whose dY (input 0) may be read widened: the input it computes with
// (input 1: SoftmaxGrad's Y, LayerNormalizationGrad's X) is float32.
bool takes_widened_grad(const Node& n) {
  if (n.domain != ops::kAmpcDomain || n.inputs.size() < 2 || !n.inputs[0] || !n.inputs[1])
    return false;
  if (n.op_type != "SoftmaxGrad" && n.op_type != "LayerNormalizationGrad") return false;
  return n.inputs[1]->type.dtype == DType::kFloat32;
}

}  // namespace

int read_row_grads_widened(ir::Model& model) {
  ir::Graph& g = *model.graph;
  const std::set<const Value*> kept = kept_values(model);
  std::vector<Node*> casts;
  for (const auto& node : g.nodes) {
    Node& n = *node;
    if (!takes_widened_grad(n)) continue;
    Node* cast = sole_widening_cast(n.inputs[0], kept);
    if (!cast) continue;
    ir::set_input(&n, 0, cast->inputs[0]);
    casts.push_back(cast);
  }
  g.remove_nodes(casts);
  return static_cast<int>(casts.size());
}

}  // namespace ampc::passes
