// Counts over a plan's steps that reports, tests and benchmarks share.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/plan/plan.pb.h"

namespace ampc::plan {

// Whether a step only reinterprets its input's bytes (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity): the memory plan makes its output a view of its input, so no kernel runs.
bool is_view_step(const Step& step);

// Kernels a step of the plan launches: every step but views (a multi-tensor kernel is one
// launch, whatever its number of segments).
int64_t count_kernels(const Plan& plan);

// Bytes of a buffer's data (aligned to nothing); -1 when its shape is not static or its
// element type has no fixed width. Throws ampc::Error, naming the buffer, when the size does
// not fit 64 bits.
int64_t buffer_bytes(const Buffer& b);

// When a backend copies each of the plan's outputs out: as soon as the step that writes it
// has run (a buffer made an output after memory planning, such as the loss scale or
// found_inf, may share arena storage with later buffers), or at the end of the run for an
// output no step writes.
struct OutputCopies {
  std::vector<std::vector<int>> after_step;  // per step: indices into plan.outputs
  std::vector<int> at_end;
};
OutputCopies output_copies(const Plan& plan);

}  // namespace ampc::plan
