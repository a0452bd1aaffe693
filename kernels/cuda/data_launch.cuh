// Launch helpers shared by the data-movement, elementwise, pooling and BatchNorm kernels
// (copy.cu, pad.cu, gather_scatter.cu, elementwise.cu, pool.cu, batchnorm.cu): grid sizes for
// grid-stride loops, the error check after a launch, a grid-stride runner of a per-index functor
// and a block's fixed-order tree sum.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "base/error.h"

namespace ampc::kernels::cuda::detail {

constexpr int kThreads = 256;
// Grid-stride kernels run at most this many blocks (enough to fill an H200's 132 SMs many
// times over); every thread then loops.
constexpr int64_t kMaxBlocks = 132 * 32;

inline unsigned grid_for(int64_t n, int threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

// Throws ampc::Error when the last launch failed (configuration errors; nothing waits).
inline void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw Error(std::string(what) + ": CUDA launch failed: " + cudaGetErrorString(e));
}

inline void check_call(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Grid-stride loop over [0, n) with index type I. With I = uint32_t, n must stay below 2^31 so
// that i + the grid's size cannot wrap around.
#define AMPC_GRID_STRIDE(I, i, n)                                                          \
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < static_cast<I>(n); \
       i += static_cast<I>(blockDim.x) * gridDim.x)

template <typename F>
__global__ void for_each_index_kernel(int64_t n, F f) {
  AMPC_GRID_STRIDE(int64_t, k, n) f(k);
}

// The device runner of kernels/shared's run_* dispatchers (the twins pass a host loop):
// f(k) for every k in [0, n), one thread per k (grid-stride) on `stream`. f is a functor with
// an AMPC_HD operator(), passed to the kernel by value.
struct GridRun {
  cudaStream_t stream;
  template <typename F>
  void operator()(const char* what, int64_t n, const F& f) const {
    if (n <= 0) return;
    for_each_index_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, f);
    check_launch(what);
  }
};

// The sum of v over a block of kBlock threads (a power of two >= 32) in a fixed order: a tree
// v[t] += v[t + s] for s = kBlock/2 down to 1 (shared memory while s >= 32, then warp
// shuffles of the same pairs). Thread 0 gets the result. add(a, b) rounds once.
template <int kBlock, typename M, typename Add>
__device__ M block_tree_sum(M v, M* scratch, Add add) {
  const int t = threadIdx.x;
  scratch[t] = v;
  __syncthreads();
  for (int s = kBlock / 2; s >= 32; s /= 2) {
    if (t < s) scratch[t] = add(scratch[t], scratch[t + s]);
    __syncthreads();
  }
  M r = t < 32 ? scratch[t] : M(0);
  if (t < 32) {
    for (int s = 16; s > 0; s /= 2) r = add(r, __shfl_down_sync(0xffffffffu, r, s));
  }
  return r;
}

}  // namespace ampc::kernels::cuda::detail
