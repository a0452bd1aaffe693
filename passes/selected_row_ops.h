// The ops that act on each element of a boolean-mask selection x[mask] alone, for
// passes/boolean_mask_selection.h: a selected value is [K, trailing...] (K selected elements or
// rows, counted at run time), its in-place form [mask dims..., trailing...]. An op acts per
// element when it never mixes two of them: elementwise ops (with values that broadcast over the
// trailing dimensions only), Softmax / LogSoftmax, Reduce*, Gather and Slice along trailing
// axes, MatMul and Gemm of the selected rows by a matrix (a Linear layer on them). Each such op
// computes on the in-place form what it computed on the selection, once its axes count the mask's
// dimensions.
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"

namespace ampc::passes::selected_rows {

using Shape = std::vector<int64_t>;

// The trailing shape of n's output when n acts on each selected element alone: `trailing[k]`
// is input k's trailing shape when it is selected, null otherwise (those inputs must have
// static shapes). Nothing when n does not act per element.
// `opset`: the model's default-domain opset (Softmax's default axis).
std::optional<Shape> output_trailing(const ir::Node& n, const std::vector<const Shape*>& trailing,
                                     int64_t opset);

// Rewrites n, classified by output_trailing, to read the in-place forms, whose selection
// dimensions are `mask_rank` leading ones where the selection had one: its axes move, a Gemm
// becomes MatMul and Add (Gemm takes matrices only). Its output takes the type
// [mask dims..., output trailing...] (`dense_output`).
void adapt(ir::Graph& g, ir::Node* n, size_t mask_rank, const ir::TensorType& dense_output,
           int64_t opset);

}  // namespace ampc::passes::selected_rows
