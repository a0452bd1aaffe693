// Narrower views of a StepView that stay readable at a thousand nodes: one part of the step
// (--focus), the neighbourhood of one node (--around NODE --depth K), and what autocast
// changed (--diff-autocast). Tensors are kept whole; only nodes are dropped.
#pragma once

#include <string>

#include "report/step_view.h"

namespace ampc::report {

// "forward", "backward", "optimizer" (with the skip-step) or "amp" (loss scaling, the
// skip-step and every inserted cast). Throws ampc::Error for another name.
StepView focus_view(const StepView& view, const std::string& what);

// The nodes at most `depth` edges from `node` (a node name, or a tensor name: its producer
// and readers), either direction. Throws ampc::Error naming a node that is not in the step.
StepView around_view(const StepView& view, const std::string& node, int depth);

// What autocast changed: the nodes of `after` that are inserted casts (forward, and their
// backward), or that compute in another dtype than the node of that name in `before`; each
// with `change` set ("fp32 -> fp16", "inserted cast fp32 -> fp16"). Nodes `before` lacks
// (the loss scaler's, which loss scaling adds, not autocast) are left out.
StepView autocast_diff_view(const StepView& before, const StepView& after);

}  // namespace ampc::report
