// The widening Cast of a row op's incoming gradient folded into its backward. Autocast runs
// LayerNormalization and Softmax in float32 (PyTorch's autocast lists layer_norm and softmax as
// fp32 ops) and casts their outputs to the 16-bit type of the GEMMs that read them; the backward
// of that Cast is a Cast of the 16-bit gradient back to float32, a step of its own that writes
// and reads a float32 copy of it: for attention's probabilities [batch, heads, seq, seq]. Here
// ampc.SoftmaxGrad(Cast(dY, float), Y) and ampc.LayerNormalizationGrad(Cast(dY, float), X, scale)
// read the 16-bit dY widened instead: the same numbers (the widening is exact, the kernels
// compute in float32 either way), without the copy or its step.
//
// Folded where the Cast (to float32, from float16 or bfloat16) is read by that op alone, its
// output is not kept after the step (a graph output, a state update), and Y (X) is float32.
// Runs on the training step, after autodiff's Casts have been cleaned up.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Folds such Casts of the main graph; returns how many.
int read_row_grads_widened(ir::Model& model);

}  // namespace ampc::passes
