// A plan's derived state: STATE buffers that are rounded copies of other STATE buffers
// (Buffer.copy_of: a trained parameter's 16-bit copy, which the optimizer's update keeps,
// passes/weight_copies.h). Backends leave them out of Backend::state() and recompute them from
// their masters in load_state, so that a copy is never stale and checkpoints hold masters only.
#pragma once

#include <utility>
#include <vector>

#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::rt {

inline bool is_rounded_copy(const plan::Buffer& b) {
  return b.copy_of() != 0;
}

// (copy id, master id) for every rounded copy of `plan`; throws ampc::Error for a copy whose
// master is not a STATE buffer, or is not fp32, or whose own type is not fp16 / bf16 of the
// master's shape.
std::vector<std::pair<int, int>> rounded_copies(const plan::Plan& plan);

// `master` (fp32) rounded to `to` (fp16 or bf16), to nearest even: Cast's rounding.
Tensor rounded_copy(const Tensor& master, DType to);

// The value a CONSTANT or STATE buffer of `plan` starts with: its initial data, or for a
// rounded copy (which the plan stores without one) its master's, rounded.
Tensor initial_value(const plan::Plan& plan, const plan::Buffer& b);

}  // namespace ampc::rt
