// Recomputes cheap elementwise results in the backward instead of keeping them from the
// forward (rematerialisation, as torch.compile's partitioner does for pointwise ops). A GELU
// written out as x * (erf(x / sqrt 2) + 1) / 2, say: its gradient reads erf(x / sqrt 2) + 1 and
// exp(-x^2 / 2) much later, in the backward, and x too. Kept, the two intermediates are two
// activation-sized buffers alive from the forward to the backward, written by the forward's
// fused kernel and read back by the backward's; recomputed from x, which the backward keeps
// anyway, they cost a few arithmetic operations in the backward's fused kernel and no memory.
//
// A value is recomputed for its late readers (those after a gap of at least min_gap nodes, in the
// graph order the schedule follows) when it is computed by a chain of at most max_chain cheap
// elementwise nodes whose other inputs are live at the first late reader anyway: read there or
// later, graph inputs, constants or parameters (not state that a step updates). So no value
// lives longer than before. Casts are recompute_casts.h's (its report names them). Runs after
// cleanup (CSE would merge the copies back) and before lowering; fusion never merges a
// recomputation with the node it repeats.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

struct RecomputeElementwiseOptions {
  int min_gap = 16;
  int max_chain = 8;
};

// Returns the number of nodes added (recomputed copies, named with recompute_casts.h's suffix).
int recompute_elementwise(ir::Model& model, const RecomputeElementwiseOptions& options = {});

// The same for the nodes of the model's low_source_chains alone (fp32 chains autocast made of
// a 16-bit activation), where the chain's 16-bit source may outlive its last reader: the
// backward keeps the source instead of the chain's fp32 results (half the bytes of one of them,
// a sixth of what torch's GELU chain kept). Runs in every mixed-precision training plan.
int recompute_low_chains(ir::Model& model, const RecomputeElementwiseOptions& options = {});

}  // namespace ampc::passes
