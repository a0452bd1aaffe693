// Evaluation of the shape arithmetic torch's exporter writes, on constant inputs: integer
// (and small float) elementwise math with broadcasting (Add, Sub, Mul, Div, Mod, Neg, Abs,
// Min, Max, Floor, Ceil, Sqrt), comparisons and logic (Equal, Less, Greater, Not, And, Or),
// Where, ConstantOfShape, Range, Expand, Slice, Reshape (0 / -1), Tile, Split, Transpose,
// float Concat, Size and
// Cast. Constant folding (constant_folding.h) calls it for what it does not handle itself.
// Float math is evaluated only on tiny tensors that no model parameter feeds: a float
// result of +, -, *, /, sqrt computed in double and rounded once is the IEEE float32
// result, which is what a backend would compute.
#pragma once

#include <optional>
#include <vector>

#include "compiler/ir/graph.h"

namespace ampc::passes {

// Every output of node `n` (all inputs constant initializers, default domain), or nullopt.
std::optional<std::vector<ir::Tensor>> evaluate_shape_arithmetic(const ir::Node& n);

}  // namespace ampc::passes
