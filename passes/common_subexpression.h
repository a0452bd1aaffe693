// Common-subexpression elimination: of two nodes of the default ONNX domain with the same
// op, attributes and inputs, the later one goes and its readers read the earlier one's
// results. Nodes with randomness (Dropout, Random*, Bernoulli, Multinomial) merge only when
// both carry the same `seed`; nodes with subgraphs never merge.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

struct CseOptions {};

// Returns the number of nodes removed (main graph only).
int eliminate_common_subexpressions(ir::Model& model, const CseOptions& options = {});

}  // namespace ampc::passes
