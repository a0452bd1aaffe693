#include "passes/running_statistics.h"

namespace ampc::passes {

int add_running_statistics_updates(ir::Model& model, const RunningStatisticsOptions&) {
  int added = 0;
  for (const auto& n : model.graph->nodes) {
    if (n->op_type != "BatchNormalization" || !n->domain.empty()) continue;
    const auto* mode = n->attr("training_mode");
    if (!mode || mode->i == 0) continue;
    for (size_t k = 1; k <= 2; ++k) {
      ir::Value* stat = n->inputs.size() > k + 2 ? n->inputs[k + 2] : nullptr;
      ir::Value* updated = n->outputs.size() > k ? n->outputs[k] : nullptr;
      if (!stat || !updated || !stat->is_initializer() || stat->is_graph_input) continue;
      model.state_updates.push_back({stat, updated});
      ++added;
    }
  }
  return added;
}

}  // namespace ampc::passes
