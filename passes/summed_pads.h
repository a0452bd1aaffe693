// A sum of zero-padded parts that tile one axis, computed as the Concat of the parts. Autodiff
// writes the gradient of a Slice as the output gradient padded with zeros back to the input's
// shape; a tensor cut into slices along one axis (torch's nn.MultiheadAttention cuts its packed
// q, k, v projection so, as does chunk() in many exports) gets one padded gradient per slice
// and their sum: each padding writes the whole input's size and each addition reads two and
// writes one. Where the slices cover the axis exactly, without overlap, the sum is the parts
// side by side: one Concat, which writes the input's size once. Exact in every float type
// (each element of the sum is one part's element plus zeros; only a -0 may keep its sign,
// as PyTorch's own split backward, a cat, keeps it).
//
// Rewritten: a tree of Adds (sum_trees.h) of one float type whose terms are each
// Pad(part, pads) in constant mode with the default value 0 (or a constant 0), pads
// constant, non-negative and zero outside one axis, the same for all terms, each term and
// partial sum read by the sum only.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Rewrites every such sum of the main graph; returns how many.
int concat_summed_pads(ir::Model& model);

}  // namespace ampc::passes
