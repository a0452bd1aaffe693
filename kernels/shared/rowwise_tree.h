// The order in which a CUDA block reduces a row, written once for the kernels and their twins:
// 1. partition: thread t of T walks chunks of V consecutive elements, starting at element t*V
//    and stepping T*V, and folds each element into its own accumulator in that order;
// 2. tree: each warp combines its 32 partials with shuffle-down (offsets 16, 8, 4, 2, 1: lane l
//    takes combine(v[l], v[l + offset])), then warp 0 combines the T/32 warp results the same
//    way (offsets T/64 ... 1). T is 32 (a warp per row) or a power of two up to 1024.
// The device side (block_tree, under __CUDACC__) and the host emulation (tree_host) implement
// exactly these steps, so a kernel and its twin agree bit for bit.
#pragma once

#include <cstdint>

#include "kernels/shared/hd.h"

namespace ampc::kernels::shared {

constexpr int kWarpSize = 32;

AMPC_HD int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Element indices visited by thread t: for (b = first(t, V); b < n; b += stride(T, V)) the V
// elements b .. b + V - 1 that are < n.
AMPC_HD int64_t partition_first(int t, int vec) {
  return static_cast<int64_t>(t) * vec;
}
AMPC_HD int64_t partition_stride(int threads, int vec) {
  return static_cast<int64_t>(threads) * vec;
}

// Threads per row and vector width of the row kernels (softmax, layernorm, cross-entropy, row
// reductions): a warp per row below 1024 elements, else a block of 256 or 512 threads; chunks
// of 4 when the row length allows 4-element (16-byte fp32) loads.
struct RowPlan {
  int threads;
  int vec;
};
AMPC_HD RowPlan row_plan(int64_t n) {
  const int threads = n < 1024 ? kWarpSize : (n < 16384 ? 256 : 512);
  return {threads, n % 4 == 0 ? 4 : 1};
}

// Host: thread t's partial over a row of n, visit(acc, index) folding one element.
template <typename Acc, typename Visit>
Acc thread_partial_host(int t, RowPlan plan, int64_t n, Acc init, Visit visit) {
  Acc a = init;
  for (int64_t b = partition_first(t, plan.vec); b < n;
       b += partition_stride(plan.threads, plan.vec))
    for (int k = 0; k < plan.vec && b + k < n; ++k) a = visit(a, b + k);
  return a;
}

// Host: v[0..width) (a power of two) combined into v[0] as a shuffle-down tree does.
template <typename Acc, typename Combine>
void warp_tree_host(Acc* v, int width, Combine combine) {
  for (int off = width / 2; off > 0; off /= 2)
    for (int l = 0; l < off; ++l) v[l] = combine(v[l], v[l + off]);
}

// Host: warp_tree_host over v[0..width) whose values from `live` on are `init` (threads that
// took no element): the same pairs combined in the same order, except that pairs of two
// `init` values are not computed (they give `init` back for a sum with init +0 and for every
// reduction kind with its own init). Entries from `live` on need not be set. Short rows and
// chunks (a channel of a few values) then do not pay for the whole tree.
template <typename Acc, typename Combine>
Acc warp_tree_host_live(Acc* v, int64_t width, int64_t live, Acc init, Combine combine) {
  for (int64_t off = width / 2; off > 0; off /= 2) {
    for (int64_t l = 0; l < off && l < live; ++l)
      v[l] = combine(v[l], l + off < live ? v[l + off] : init);
    live = live < off ? live : off;
  }
  return v[0];
}

// Host: the block result from the T per-thread partials v[0..T) (v is overwritten).
template <typename Acc, typename Combine>
Acc tree_host(Acc* v, int threads, Combine combine) {
  const int warps = threads / kWarpSize;
  for (int w = 0; w < warps; ++w) warp_tree_host(v + w * kWarpSize, kWarpSize, combine);
  for (int w = 1; w < warps; ++w) v[w] = v[w * kWarpSize];
  warp_tree_host(v, warps, combine);
  return v[0];
}

// Host: the whole row reduction (partition, then tree) with T threads.
template <typename Acc, typename Visit, typename Combine>
Acc row_reduce_host(RowPlan plan, int64_t n, Acc init, Visit visit, Combine combine) {
  Acc v[1024];
  for (int t = 0; t < plan.threads; ++t) v[t] = thread_partial_host(t, plan, n, init, visit);
  return tree_host(v, plan.threads, combine);
}

#if defined(__CUDACC__)
// Device: lane 0 of each warp gets the combination of the warp's values (offsets width/2..1).
template <typename Acc, typename Combine>
__device__ __forceinline__ Acc warp_tree(Acc v, int width, Combine combine) {
  for (int off = width / 2; off > 0; off /= 2)
    v = combine(v, __shfl_down_sync(0xffffffffu, v, off));
  return v;
}

// Device: every thread of the row's group (a whole block of `threads`, or one warp when
// threads == 32) gets the tree result of the partials v. smem: threads / 32 values, reused
// across calls (the trailing barrier makes that safe).
template <typename Acc, typename Combine>
__device__ __forceinline__ Acc block_tree(Acc v, int threads, Acc* smem, Combine combine) {
  v = warp_tree(v, kWarpSize, combine);
  if (threads == kWarpSize) return __shfl_sync(0xffffffffu, v, 0);
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  const int warps = threads / kWarpSize;
  v = smem[lane < warps ? lane : 0];
  v = warp_tree(v, warps, combine);
  v = __shfl_sync(0xffffffffu, v, 0);  // every warp computed the same second stage
  __syncthreads();
  return v;
}
#endif

}  // namespace ampc::kernels::shared
