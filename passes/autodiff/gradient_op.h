// ai.onnx.preview.training's Gradient op: Gradient(xs=[...], zs=[...], y=Y) with inputs the
// values of xs then zs outputs dY/dx for every x of xs. Each such node is replaced by the
// gradient graph it stands for (the reverse sweep of autodiff.h with the gradient rules),
// ending in an Identity per output so that output names stay as they are.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

inline constexpr const char* kOnnxTrainingDomain = "ai.onnx.preview.training";

// A Y with more than one element is differentiated as the sum of its elements (seed of
// ones). An x that Y does not depend on gets a zero gradient. The inputs must be the values
// that xs and zs name (feeding other values is refused with an error naming the node).
// Returns the number of Gradient nodes replaced.
int expand_gradient_ops(ir::Model& model);

}  // namespace ampc::passes
