// Removes nodes whose results reach no graph output, and initializers nobody reads. ONNX
// operators have no side effects, so a node nobody reads can go.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

struct DeadCodeOptions {};

// Returns the number of nodes removed (subgraphs are left as they are).
int eliminate_dead_code(ir::Model& model, const DeadCodeOptions& options = {});

}  // namespace ampc::passes
