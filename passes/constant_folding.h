// Folds the small integer computations exporters leave around shapes (PyTorch writes
// Constant -> Unsqueeze -> Concat -> Reshape chains, and Shape -> Gather of static shapes)
// into initializers, so later passes see static shape inputs. Constant nodes become
// initializers. Only data movement and integer arithmetic are evaluated here: the compiler
// never runs kernels, and float math is left to the backends so it rounds as they do.
#pragma once

#include <cstdint>

#include "compiler/ir/graph.h"

namespace ampc::passes {

struct ConstantFoldingOptions {
  // Results with more elements stay computed at run time (no plan bloat).
  int64_t max_elements = 4096;
};

// Returns the number of nodes folded.
int fold_constants(ir::Model& model, const ConstantFoldingOptions& options = {});

}  // namespace ampc::passes
