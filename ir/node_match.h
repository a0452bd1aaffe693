// Small predicates that passes use to match nodes of the default ONNX domain.
#pragma once

#include <string_view>

#include "ir/graph.h"

namespace ampc::ir {

// Whether `n` is a node of the default ONNX domain of type `op` (false for null).
inline bool is_onnx_op(const Node* n, std::string_view op) {
  return n && n->domain.empty() && n->op_type == op;
}

}  // namespace ampc::ir
