#include "passes/autodiff/stop_gradient.h"

namespace ampc::passes {

StopGradients stop_gradients(const ir::Model& model) {
  StopGradients stops;
  for (const auto& [key, value] : model.metadata) stops.recorded |= key == kStopGradientKey;
  for (const std::string& name : metadata_lines(model, kStopGradientKey)) {
    if (const ir::Value* v = model.graph->find_value(name)) stops.values.insert(v);
  }
  return stops;
}

bool is_step_function(const ir::Node& n) {
  return n.domain.empty() && (n.op_type == "Round" || n.op_type == "Floor" || n.op_type == "Ceil" ||
                              n.op_type == "Sign");
}

const ir::Node* lost_detach(const ir::Graph& g, const std::set<const ir::Value*>& differentiated) {
  for (const auto& node : g.nodes) {
    const ir::Node& n = *node;
    if (!n.domain.empty() || n.op_type != "Add" || n.inputs.size() != 2 || !n.outputs[0] ||
        !differentiated.count(n.outputs[0]))
      continue;
    for (size_t k = 0; k < 2; ++k) {
      const ir::Node* sub = n.inputs[1 - k] ? n.inputs[1 - k]->producer : nullptr;
      if (sub && sub->domain.empty() && sub->op_type == "Sub" && sub->inputs.size() == 2 &&
          sub->inputs[1] == n.inputs[k])
        return &n;
    }
  }
  return nullptr;
}

}  // namespace ampc::passes
