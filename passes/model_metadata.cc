#include "passes/model_metadata.h"

#include <algorithm>

namespace ampc::passes {

std::vector<std::string> value_lines(const std::string& value) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t end = std::min(value.find('\n', start), value.size());
    if (end > start) lines.push_back(value.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::vector<std::string> metadata_lines(const ir::Model& model, const std::string& key) {
  std::vector<std::string> lines;
  for (const auto& [k, value] : model.metadata) {
    if (k != key) continue;
    const std::vector<std::string> more = value_lines(value);
    lines.insert(lines.end(), more.begin(), more.end());
  }
  return lines;
}

}  // namespace ampc::passes
