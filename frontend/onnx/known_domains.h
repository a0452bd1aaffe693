// Operator domains ampc understands: ONNX's own, and its own "ampc" domain (gradient ops,
// ops/schemas/ampc_schemas.h).
#pragma once

#include <string_view>

namespace ampc::onnx_io {

inline bool is_known_domain(std::string_view domain) {
  return domain.empty() || domain == "ai.onnx" || domain == "ai.onnx.ml" ||
         domain == "ai.onnx.preview.training" || domain == "ampc";
}

}  // namespace ampc::onnx_io
