// Counts over a plan's steps that reports, tests and benchmarks share.
#pragma once

#include <cstdint>

#include "runtime/plan/plan.pb.h"

namespace ampc::plan {

// Whether a step only reinterprets its input's bytes (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity): the memory plan makes its output a view of its input, so no kernel runs.
bool is_view_step(const Step& step);

// Kernels a step of the plan launches: every step but views (a multi-tensor kernel is one
// launch, whatever its number of segments).
int64_t count_kernels(const Plan& plan);

}  // namespace ampc::plan
