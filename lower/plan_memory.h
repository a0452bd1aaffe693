// The static memory plan of an emitted plan (plan.proto: Buffer.region/offset/alias_of,
// Plan.memory): where every buffer lives, so that a backend allocates four regions and a
// workspace once at load and binds every buffer to an offset.
//
// - ACTIVATION and OUTPUT buffers live in the arena, reused across the step: a buffer is live
//   from the step that writes it to the last step that reads it; OUTPUT buffers and the
//   sources of state updates to the end of the step. Offsets come from
//   lower/memory_plan.h (best-fit greedy-by-size, 256-byte alignment).
// - STATE, CONSTANT and INPUT buffers each have a region of their own, laid out in buffer
//   order.
// - Views (plan::is_view_step) share their input's storage (alias_of): in the arena with the
//   lifetimes merged, or in the input's region at its offset.
// - An elementwise step (a fused kernel, or a single elementwise ONNX op) may write an output
//   in place of a full-shape input of the same byte size that it is the last to read
//   (alias_of).
// - Buffers that already alias a STATE buffer (fused optimizer updates written into the
//   state) live in the STATE region at the state's offset.
// - When an arena buffer has no static shape, the arena is not planned: its buffers stay
//   REGION_NONE and the arena's byte counts are 0 (such plans run on the CPU backend only).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/plan/plan.pb.h"
#include "runtime/plan/plan_stats.h"

namespace ampc::lower {

// The workspace the CUDA backend preallocates for cuBLASLt when the plan has GEMM steps
// (MatMul, Gemm): the one place this size is defined. cuDNN's workspaces depend on the
// algorithms chosen on the device, so they are sized when the plan is loaded.
inline constexpr int64_t kCublasLtWorkspaceBytes = int64_t{32} << 20;

// Sets every buffer's region, offset and (views, in-place writes) alias_of, and Plan.memory.
// Planning a plan again gives the same result.
void plan_memory(plan::Plan& p);

// The point of the schedule where the most arena bytes are live (the lower bound), as
// plan_memory counted them: `buffers` are the arena buffers that own storage (alias_of 0)
// live there, largest first.
struct ArenaPeak {
  int32_t step = -1;  // -1: nothing in the arena; steps_size(): after the last step
  int64_t bytes = 0;
  std::vector<int32_t> buffers;
};
ArenaPeak arena_peak(const plan::Plan& p);

// Bytes of a buffer's data (runtime/plan/plan_stats.h).
using plan::buffer_bytes;

}  // namespace ampc::lower
