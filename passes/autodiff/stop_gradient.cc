#include "passes/autodiff/stop_gradient.h"

#include <algorithm>

namespace ampc::passes {

std::vector<std::string> metadata_lines(const ir::Model& model, const std::string& key) {
  std::vector<std::string> lines;
  for (const auto& [k, value] : model.metadata) {
    if (k != key) continue;
    size_t start = 0;
    while (start <= value.size()) {
      const size_t end = std::min(value.find('\n', start), value.size());
      if (end > start) lines.push_back(value.substr(start, end - start));
      start = end + 1;
    }
  }
  return lines;
}

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

}  // namespace ampc::passes
