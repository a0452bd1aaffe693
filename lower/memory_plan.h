// Static memory planning over an abstract problem: buffers with byte sizes and lifetimes over
// the points of a schedule (the steps, in execution order), some of which may take over the
// storage of another buffer in place. It knows nothing of plans or backends;
// lower/plan_memory.h applies it to a plan.
//
// Offsets come from best-fit greedy-by-size (TFLite's greedy-by-size, XLA's heap simulator):
// buffers in decreasing size, each placed in the smallest gap between already placed buffers
// whose lifetimes overlap its own, or after the highest of them when no gap fits.
#pragma once

#include <cstdint>
#include <vector>

namespace ampc::lower {

// Every offset and every size the planner works with is a multiple of this (bytes).
inline constexpr int64_t kMemoryAlignment = 256;

// `bytes` rounded up to a multiple of `alignment` (> 0).
int64_t align_up(int64_t bytes, int64_t alignment);

struct MemoryBuffer {
  int64_t bytes = 0;
  // Inclusive range of schedule points at which the buffer is live: from the step that
  // writes it to the last step that reads it. first > last: never live (no storage needed,
  // offset 0, overlaps nothing).
  int32_t first = 0;
  int32_t last = 0;
  // In-place candidates, in order of preference: buffers whose storage this one may take
  // over. The planner accepts the first candidate X for which it is legal: X starts before
  // this buffer, X's storage (X and whatever already shares it) is last live at this
  // buffer's `first`, X is the last buffer to have taken that storage (no other buffer took
  // it over already), and this buffer fits in it. Whether the computation may write in
  // place is the caller's business. Buffers sharing storage form chains in which only
  // neighbours overlap in time (at one point: where one is last read and the next written).
  std::vector<int32_t> may_share;
};

struct MemoryPlanResult {
  std::vector<int64_t> offsets;  // per buffer, a multiple of the alignment
  // Per buffer: the candidate whose storage it took over (from may_share), or -1.
  std::vector<int32_t> shared_with;
  int64_t arena_bytes = 0;  // the end of the highest placed buffer
  // The most bytes live at any one point of the schedule, with sizes aligned and in-place
  // sharing applied as accepted: no placement of these lifetimes fits in fewer bytes.
  int64_t lower_bound_bytes = 0;
  int32_t peak_point = -1;  // a schedule point where the lower bound is reached (-1: none)
};

MemoryPlanResult plan_memory_offsets(const std::vector<MemoryBuffer>& buffers,
                                     int64_t alignment = kMemoryAlignment);

}  // namespace ampc::lower
