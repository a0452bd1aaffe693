// Einsum (torch.einsum) lowered at compile time into the ops its contraction is made of:
// Transpose and Reshape around a batched MatMul per pair of operands, ReduceSum for a
// subscript only one operand has and the output drops, Expand where a size-1 axis
// broadcasts against another operand's. Operands are contracted left to right. So the
// forward, the gradient, autocast (MatMul is on the low-precision list, as Einsum is) and
// both backends need nothing new, and the contraction runs as a GEMM.
//
// ONNX's shape inference gives an Einsum output its rank only: the lowering computes the
// output shape from the operands' static shapes, and the caller infers the shapes that
// depend on it again (an Einsum reading another one's output is lowered in the next round).
// Ellipses ("...") broadcast as numpy's do; an implicit output ("ij,jk") is the ellipsis
// then the subscripts used once, in alphabetical order. An Einsum with a subscript repeated
// within one operand (a diagonal, "ii->i") is left as it is: the CPU op computes it for
// inference, and training it stops at its unknown output shape, naming the node.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Lowers the Einsum nodes whose operands have static shapes; returns how many.
int lower_einsum(ir::Model& model);

}  // namespace ampc::passes
