// Recomputes narrowing casts instead of keeping their results: in mixed precision the
// forward casts an fp32 activation (attention probabilities, say) to fp16 for a GEMM, and
// the backward needs both the fp32 value (its own gradient rule) and the fp16 copy (the
// GEMM's). Kept from the forward to the backward, the copy costs memory for the whole gap;
// cast again where the backward reads it, from the fp32 value that is live there anyway, it
// costs one cheap elementwise kernel. Runs after cleanup (CSE would merge the copies back)
// and before lowering; fusion never merges a recomputation with the node it repeats.
#pragma once

#include <string_view>

#include "ir/graph.h"

namespace ampc::passes {

// The suffix of a recomputed Cast's node and value names (reports recognise them by it).
inline constexpr std::string_view kRecomputedSuffix = "_recomputed";

struct RecomputeCastsOptions {
  // A cast is recomputed for the readers that come at least this many nodes after the
  // previous reader of its result (in the graph order, which the schedule follows).
  int min_gap = 16;
};

// Returns the number of casts added. Only float -> narrower float casts of activations
// (values computed by a node, not state or constants) whose source is read at or after the
// late readers, so no value lives longer than before.
int recompute_casts(ir::Model& model, const RecomputeCastsOptions& options = {});

}  // namespace ampc::passes
