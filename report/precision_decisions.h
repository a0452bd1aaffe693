// Plan.precision_decisions: what autocast decided for each node and Cast still in an emitted
// plan's graph. The driver records it after plan emission, so that lowering does not depend
// on the passes that made the decisions.
#pragma once

#include "ir/graph.h"
#include "passes/autocast.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::report {

void record_precision_decisions(const ir::Graph& g, const passes::AutocastReport& report,
                                plan::Plan& p);

}  // namespace ampc::report
