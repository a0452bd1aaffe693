#include "passes/loss_log_prob.h"

#include "ops/schemas/ampc_schemas.h"

namespace ampc::passes {

int keep_loss_log_prob(ir::Model& model, const LossLogProbOptions&) {
  ir::Graph& g = *model.graph;
  int changed = 0;
  for (const auto& node : g.nodes) {
    ir::Node& n = *node;
    if (n.op_type != "SoftmaxCrossEntropyLoss" ||
        !(n.domain.empty() || n.domain == "ai.onnx" || n.domain == ops::kAmpcDomain))
      continue;
    if (n.outputs.size() > 1 && n.outputs[1]) continue;
    if (n.inputs.empty() || !n.inputs[0]) continue;
    std::string name = n.outputs[0]->name + "_log_prob";
    while (g.find_value(name)) name += "_";
    // The loss's type: the scores' but for ampc's, which reads 16-bit scores widened.
    ir::set_output(&n, 1, g.add_value(name, {n.outputs[0]->type.dtype, n.inputs[0]->type.shape}));
    ++changed;
  }
  return changed;
}

}  // namespace ampc::passes
