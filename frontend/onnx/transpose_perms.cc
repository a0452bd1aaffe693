#include "frontend/onnx/transpose_perms.h"

#include <cstdint>

namespace ampc::onnx_io {

int normalize_transpose_perms(onnx::GraphProto& graph) {
  int rewritten = 0;
  for (auto& node : *graph.mutable_node()) {
    for (auto& attr : *node.mutable_attribute()) {
      if (attr.has_g()) rewritten += normalize_transpose_perms(*attr.mutable_g());
      for (auto& g : *attr.mutable_graphs()) rewritten += normalize_transpose_perms(g);
    }
    if (node.op_type() != "Transpose" || !node.domain().empty()) continue;
    for (auto& attr : *node.mutable_attribute()) {
      if (attr.name() != "perm") continue;
      const auto rank = static_cast<int64_t>(attr.ints_size());
      bool changed = false;
      for (int i = 0; i < attr.ints_size(); ++i) {
        const int64_t p = attr.ints(i);
        if (p < 0 && p >= -rank) {
          attr.set_ints(i, p + rank);
          changed = true;
        }
      }
      rewritten += changed ? 1 : 0;
    }
  }
  return rewritten;
}

}  // namespace ampc::onnx_io
