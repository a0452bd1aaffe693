// Boolean-mask selection in a loss: PyTorch's `x[mask]` (and `torch.masked_select`) exports as
// GatherND(x, Transpose(NonZero(mask))), whose length is the number of true elements, known
// only at run time, so the step could not be differentiated or planned. A masked loss is a
// common shape of it: `F.mse_loss(pred[valid], y[valid])` over the targets that are not NaN,
// `F.cross_entropy(logits[mask], labels[mask])` over the tokens that are not padding,
// `err[err > 0].mean()`.
//
// Where every use of the selected elements leads, through ops that act on each of them alone
// (selected_row_ops.h: elementwise ops with other selections by the same mask or with values
// that broadcast over the trailing dimensions only, Softmax, Reduce*, Gather and Slice along
// trailing axes, a Linear layer on selected rows), to a sum or a mean over all of them, or to
// the rows of a SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss with reduction mean or
// sum, or to a write into the selected places of a tensor of the mask's shape, the selection
// is computed in place instead (static shapes, the same results and
// gradients):
//
//   x[mask]           -> Where(mask, x, x's first selected row)   the mask's shape, kept
//   sum over all      -> ReduceSum(Where(mask, v, 0))
//   mean over all     -> that sum / (true elements x the trailing size)
//   cross-entropy     -> the loss over every row, the unselected rows' labels set to its
//                        ignore_index (which the mean and the weights then leave out)
//   y[mask] = v       -> Where(mask, v, y), for a mask of y's shape (torch's index_put:
//                        ScatterND at the mask's true places; torchvision's box losses write
//                        `intsct[mask] = (x2[mask] - x1[mask]) * ...` this way)
//
// The unselected places hold a copy of a selected row, never other data, so the ops after
// compute there only what they compute on a selected element: no infinity or NaN that
// PyTorch would not meet (a NaN target left out by the mask stays out of the gradient too).
// With no element selected, a mean is 0 / 0 = NaN, as PyTorch's mean of an empty tensor.
//
// Selections whose uses do not fit are left as they are: a forward plan on the CPU runs them;
// training names the NonZero (passes/static_shapes.h).
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Returns the number of selections (GatherND nodes) rewritten.
int compute_boolean_masks_in_place(ir::Model& model);

}  // namespace ampc::passes
