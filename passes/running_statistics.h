// BatchNormalization in training mode computes new running mean and variance (outputs 1
// and 2); when its inputs 3 and 4 are initializers, they become state updated each step.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

struct RunningStatisticsOptions {};

// Returns the number of statistics turned into state.
int add_running_statistics_updates(ir::Model& model, const RunningStatisticsOptions& options = {});

}  // namespace ampc::passes
