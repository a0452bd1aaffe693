#include "passes/idle_dropouts.h"

#include <set>
#include <vector>

#include "ir/node_match.h"
#include "passes/constant_folding.h"
#include "passes/dead_code_elimination.h"

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;

// The data of input `k` of `n` when it is present and a constant that does not change.
const ir::Tensor* constant_input(const Node& n, size_t k, const std::set<const Value*>& variable) {
  return fixed_data(k < n.inputs.size() ? n.inputs[k] : nullptr, variable);
}

// Whether Dropout `n` (opset 12 on: data, ratio, training_mode) is the identity.
bool drops_nothing(const Node& n, const std::set<const Value*>& variable) {
  const bool mode_given = n.inputs.size() > 2 && n.inputs[2];
  if (!mode_given) return true;  // inference mode
  if (const ir::Tensor* mode = constant_input(n, 2, variable)) {
    if (mode->dtype == DType::kBool && mode->numel() == 1 && mode->bytes[0] == 0) return true;
  }
  const bool ratio_given = n.inputs.size() > 1 && n.inputs[1];
  if (!ratio_given) return false;  // the default ratio, 0.5
  const ir::Tensor* ratio = constant_input(n, 1, variable);
  const auto r = ratio ? ir::float_scalar(*ratio) : std::nullopt;
  return r && *r == 0.0;
}

// Whether the outputs of `n` may be bypassed: its mask unread, neither kept after the step.
bool bypassable(const Node& n, const std::set<const Value*>& kept) {
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const Value* y = n.outputs[k];
    if (!y) continue;
    if (kept.count(y) || (k > 0 && !y->uses.empty())) return false;
  }
  return !n.outputs.empty() && n.outputs[0] && n.inputs.size() >= 1 && n.inputs[0];
}

}  // namespace

int remove_idle_dropouts(ir::Model& model) {
  ir::Graph& g = *model.graph;
  const int64_t opset = model.opset_version("").value_or(0);
  const std::set<const Value*> variable = variable_values(model);
  const std::set<const Value*> kept = kept_values(model);
  std::vector<Node*> idle;
  for (const auto& node : g.nodes) {
    const Node& n = *node;
    if (!ir::is_onnx_op(&n, "Dropout") || !bypassable(n, kept)) continue;
    if (opset >= 12 && !drops_nothing(n, variable)) continue;
    idle.push_back(node.get());
  }
  for (Node* n : idle) ir::replace_all_uses(n->outputs[0], n->inputs[0]);
  if (!idle.empty()) g.remove_nodes(idle);
  return static_cast<int>(idle.size());
}

}  // namespace ampc::passes
