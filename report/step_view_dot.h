// Graphviz DOT of a StepView: one cluster per phase (forward, backward, loss scaling,
// optimizer, skip-step, ...), inside it one cluster per fused kernel (plan step) holding the
// ONNX nodes it fused; nodes filled by compute dtype with the deciding rule in the label,
// inserted casts drawn bold red, the amp.found_inf edges of the skip-step drawn red.
#pragma once

#include <string>

#include "report/step_view.h"

namespace ampc::report {

struct StepDotOptions {
  // Name scopes at this depth (1: "/blocks.0") are drawn as one box each, with their node
  // count; 0 draws every node.
  int collapse_depth = 0;
};

std::string step_view_dot(const StepView& view, const StepDotOptions& options = {});

// The fill colour of a compute dtype class ("fp32", "fp16", "bf16", integers, "bool"),
// shared by the picture and the page.
const char* dtype_fill(const std::string& dtype);

}  // namespace ampc::report
