// Reverse-mode differentiation of a scalar loss with respect to the trainable parameters.
// Gradient nodes are appended to the main graph; gradients of a value read several times
// are summed. An op without a gradient rule is an error naming the op and the node.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/graph.h"

namespace ampc::passes {

struct AutodiffOptions {
  std::string loss;                 // graph output to differentiate; empty: the only output
  std::vector<std::string> freeze;  // glob patterns (fnmatch) of parameters not to train
};

struct ParameterGradient {
  ir::Value* parameter;
  ir::Value* gradient;
};

// Trainable parameters: float initializers of the source model (Value::from_model) that are
// not graph inputs, minus frozen ones.
// Returns one entry per parameter that the loss depends on, in initializer order.
std::vector<ParameterGradient> differentiate(ir::Model& model, const AutodiffOptions& options);

}  // namespace ampc::passes
