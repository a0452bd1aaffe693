// Removes nodes whose results reach no graph output, and initializers nobody reads. ONNX
// operators have no side effects, so a node nobody reads can go.
#pragma once

#include <set>

#include "ir/graph.h"

namespace ampc::passes {

struct DeadCodeOptions {
  // Keep the initializers nobody reads: a pass before autodiff removing what its own rewrite
  // left must not drop a parameter the model does not use (the trainer still holds it).
  bool keep_initializers = false;
};

// Values that count as read whatever their uses: graph outputs and both ends of state updates
// (a state update's source is read after the step, as a graph output is).
std::set<const ir::Value*> kept_values(const ir::Model& model);

// Returns the number of nodes removed (subgraphs are left as they are).
int eliminate_dead_code(ir::Model& model, const DeadCodeOptions& options = {});

}  // namespace ampc::passes
