// An Expand read by ops that broadcast their operands themselves: they read the Expand's input
// instead. Autodiff writes the gradient of a reduction (ReduceMean, ReduceSum, a loss's mean,
// GlobalAveragePool) as the output gradient expanded back to the input's shape, and that
// expansion is mostly read by the sum that accumulates the input's gradient, or by a product:
// an Expand step wrote the whole input's size (squeeze-excite blocks, a hand-written RMSNorm,
// an MSE loss) for an op that would broadcast the small tensor anyway, and the fused kernel
// then read it back. The same numbers in every type: an elementwise op computes element i from
// the element each operand has there, broadcast or stored.
//
// Rewritten: each use of an Expand's output (static types) by Add, Sub, Mul, Div, Pow, the
// comparisons, And, Or, Xor, Where or PRelu's slope (ONNX's, opset 7 on: numpy broadcasting),
// or by Max, Min, Sum or Mean (opset 8 on), where the reader's output keeps its shape with the
// Expand's input in its place. An Expand left without readers (not a graph output) is removed.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Rewrites the uses of the main graph; returns how many.
int read_expands_as_broadcasts(ir::Model& model);

}  // namespace ampc::passes
