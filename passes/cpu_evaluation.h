// Evaluation of one IR node at compile time by the CPU backend's implementation of its
// operator (runtime/cpu/ops): the one definition of each op's semantics, checked against
// ONNX's conformance data. Constant folding (constant_folding.h) decides what to evaluate;
// this only runs it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace ampc::passes {

// What the CPU op is given for each present input of the node.
enum class CpuInputs {
  kInitializers,  // its initializer's data (every present input must have one)
  kShapesOnly,    // its static shape over no data (every present input must have one): for
                  // ops that read only shapes, as Shape and Size do
};

// Every output of `n` (none of them omitted), computed by the CPU op of the node's domain
// and op type under `opset` (0 when the model names none, as in plans). Nullopt when the
// CPU backend has no such op or it fails (ampc::Error, or too little memory): the backend
// that runs the node reports the error then.
std::optional<std::vector<ir::Tensor>> evaluate_on_cpu(const ir::Node& n, int64_t opset,
                                                       CpuInputs inputs);

}  // namespace ampc::passes
