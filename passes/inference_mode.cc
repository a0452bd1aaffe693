#include "passes/inference_mode.h"

#include <algorithm>

#include "base/error.h"
#include "passes/dead_code_elimination.h"

namespace ampc::passes {
namespace {

bool is_graph_output(const ir::Graph& g, const ir::Value* v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

// Removes the outputs of `n` from index `first` on; they must be unread.
void drop_outputs_from(ir::Graph& g, ir::Node& n, size_t first) {
  for (size_t k = first; k < n.outputs.size(); ++k) {
    ir::Value* v = n.outputs[k];
    if (!v) continue;
    if (!v->uses.empty() || is_graph_output(g, v)) {
      throw Error("node " + n.label() + ": output '" + v->name +
                  "' only exists in training mode but is read; the model cannot be evaluated");
    }
    g.erase_values_if([v](const ir::Value& p) { return &p == v; });
  }
  if (n.outputs.size() > first)
    n.outputs.erase(n.outputs.begin() + static_cast<std::ptrdiff_t>(first), n.outputs.end());
}

void drop_input(ir::Node& n, size_t k) {
  if (!n.inputs[k]) return;
  ir::set_input(&n, k, nullptr);
  ir::trim_omitted_inputs(&n);
}

}  // namespace

int set_inference_mode(ir::Model& model) {
  ir::Graph& g = *model.graph;
  int changed = 0;
  std::vector<ir::Node*> dead;
  for (const auto& node : g.nodes) {
    ir::Node& n = *node;
    if (n.domain == "ampc" && n.op_type == "BatchStatistics" && n.inputs.size() == 4) {
      // A synchronised BatchNorm (passes/sync_batch_norm.h): its running statistics instead
      // of the batch's; the batch's, with their all-reduces, are left without readers.
      for (size_t k = 0; k < 2 && k < n.outputs.size(); ++k) {
        if (n.outputs[k]) ir::replace_all_uses(n.outputs[k], n.inputs[k]);
      }
      dead.push_back(&n);
      ++changed;
      continue;
    }
    if (!n.domain.empty()) continue;
    if (n.op_type == "BatchNormalization") {
      auto it = std::find_if(n.attributes.begin(), n.attributes.end(),
                             [](const ir::Attribute& a) { return a.name == "training_mode"; });
      if (it == n.attributes.end() || it->i == 0) continue;
      n.attributes.erase(it);  // the default, 0, is inference mode
      drop_outputs_from(g, n, 1);
      ++changed;
    } else if (n.op_type == "Dropout" && n.inputs.size() > 2 && n.inputs[2]) {
      // An omitted training_mode input means inference mode (opset 12+).
      drop_input(n, 2);
      drop_outputs_from(g, n, 1);
      ++changed;
    }
  }
  // The BatchStatistics nodes and the batch statistics they read (all-reduces included): a
  // forward on one rank's held-out batch must not wait for the other ranks.
  if (!dead.empty()) eliminate_dead_code(model);
  return changed;
}

}  // namespace ampc::passes
