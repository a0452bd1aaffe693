// The start of a row kernel (softmax.cu, layernorm.cu, cross_entropy.cu): one block per row,
// the block's row found, blocks past the last row leaving, and the thread's part of the row
// (cached or streamed) handed to the row's function with the block's reduction scratch.
#pragma once

#include <cstdint>

#include "kernels/shared/rowwise_device.h"

namespace ampc::kernels::cuda {

// f(part, row, smem) for this block's row of x (rows x n, row-major): part is this thread's
// part of the row (shared::with_row_part), smem the block's shared scratch of kWarpSize floats.
template <int kThreads, typename T, typename F>
__device__ __forceinline__ void with_block_row(const T* x, int64_t rows, int64_t n, F&& f) {
  __shared__ float smem[shared::kWarpSize];
  int t;
  const int64_t row = shared::block_row<kThreads>(rows, &t);
  if (row < 0) return;
  shared::with_row_part<kThreads>(x + row * n, n, t, [&](const auto& part) { f(part, row, smem); });
}

}  // namespace ampc::kernels::cuda
