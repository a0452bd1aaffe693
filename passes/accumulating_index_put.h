// Accumulating index_put with repeated indices: torch 1.13 exports
// `x.index_put_(indices, v, accumulate=True)` (`torch.index_put`, `Tensor.index_put`) as
// x + ScatterND(zeros, indices, v) without a reduction. With a repeated index ONNX leaves
// that ScatterND's result undefined (ampc's kernels keep one of the values), where PyTorch
// sums them: a silently different forward and gradient (an embedding table's or a graph's
// rows written by index lists).
//
// A ScatterND without a reduction whose data is all zeros (a ConstantOfShape of 0 or a
// zero constant) and whose result an Add reads is given reduction "add": the same result
// where the indices are distinct, PyTorch's sums where they repeat, and each update's
// gradient is its place's, as PyTorch's. (Without accumulate, PyTorch leaves repeats
// undefined too, so summing them there is within its contract.)
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Gives every such ScatterND of the main graph reduction "add"; returns how many.
int accumulate_index_puts(ir::Model& model);

}  // namespace ampc::passes
