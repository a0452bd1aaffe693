#include "passes/model_metadata.h"

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

}  // namespace ampc::passes
