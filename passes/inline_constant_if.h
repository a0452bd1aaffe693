// If nodes whose condition is a constant replaced by the branch they take. torch exports a
// `squeeze(dim)` whose dimension it could not size as If(Equal(Shape(x)[dim], 1), Squeeze,
// Identity) (nn.LocalResponseNorm does so), and Python conditions on shapes the same way;
// with static shapes the condition folds to a constant (static_shapes.h), and the branch's
// nodes, copied into the graph in place of the If, are what the plan runs. An If whose
// condition stays computed, or whose taken branch holds control flow itself, is left as it is
// (the plan refuses control flow naming the node).
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Returns the number of If nodes replaced.
int inline_constant_ifs(ir::Model& model);

}  // namespace ampc::passes
