#include "passes/widened_loss_scores.h"

#include <set>
#include <string>
#include <vector>

#include "ir/node_match.h"
#include "ops/schemas/ampc_schemas.h"
#include "passes/dead_code_elimination.h"
#include "passes/widening_cast.h"

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;

// Whether the loss computes in float32.
bool foldable_loss(const Node& n) {
  if (!ir::is_onnx_op(&n, "SoftmaxCrossEntropyLoss") || n.outputs.empty() || !n.outputs[0])
    return false;
  for (const Value* out : n.outputs) {
    if (out && out->type.dtype != DType::kFloat32) return false;
  }
  const Value* weights = n.inputs.size() > 2 ? n.inputs[2] : nullptr;
  return !weights || weights->type.dtype == DType::kFloat32;
}

// The loss's decision, recorded under its label `was`, under its new one.
void follow_decision(AutocastReport& report, const std::string& was, const Node& loss,
                     DType scores) {
  for (auto& d : report.nodes) {
    if (d.node != was) continue;
    d.node = loss.label();
    d.rule += "; its " + std::string(dtype_name(scores)) +
              " scores read widened, no float32 copy (widened_loss_scores.h)";
  }
}

}  // namespace

int read_loss_scores_widened(ir::Model& model, AutocastReport* report) {
  ir::Graph& g = *model.graph;
  const std::set<const Value*> kept = kept_values(model);
  std::vector<Node*> casts;
  for (const auto& node : g.nodes) {
    Node& n = *node;
    if (!foldable_loss(n)) continue;
    Node* cast = sole_widening_cast(n.inputs.empty() ? nullptr : n.inputs[0], kept);
    if (!cast) continue;
    const std::string was = n.label();
    ir::set_input(&n, 0, cast->inputs[0]);
    n.domain = ops::kAmpcDomain;
    if (report) follow_decision(*report, was, n, cast->inputs[0]->type.dtype);
    casts.push_back(cast);
  }
  if (casts.empty()) return 0;
  g.remove_nodes(casts);
  ops::register_ampc_schemas();
  if (!model.opset_version(ops::kAmpcDomain))
    model.opsets.push_back({ops::kAmpcDomain, ops::kAmpcDomainVersion});
  return static_cast<int>(casts.size());
}

}  // namespace ampc::passes
