// ONNX's shape inference (run at import with its errors off, so that a model it cannot follow
// everywhere still loads) leaves the output of an elementwise node whose inputs do not
// broadcast without type or shape. Nothing later names the cause: training said "does not
// depend on any trainable parameter" (the typeless output cuts the path from the weights) and a
// forward plan "the rank of input 0 is not known". Such a node is refused at import instead,
// in one line with its inputs' shapes (torch's export can write it: a constant folded from a
// wrongly inferred shape).
#pragma once

#include "ir/graph.h"

namespace ampc::onnx_io {

// Throws for the first node with multidirectional broadcasting (Add, Mul, Where, Greater,
// Max, Sum, ...) whose inputs have static shapes that do not broadcast.
void refuse_unbroadcastable_inputs(const ir::Graph& graph);

}  // namespace ampc::onnx_io
