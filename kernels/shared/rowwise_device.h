// Device side of the row-wise, reduction and AMP kernels (nvcc only): a thread's walk over its
// part of a row in rowwise_tree.h's partition (with 16-byte / 8-byte vector loads where the row
// is aligned: the same elements in the same order, only the load instruction differs),
// loads and stores of element types chosen at run time, and the launch checks.
#pragma once

#if !defined(__CUDACC__)
#error "kernels/shared/rowwise_device.h is for nvcc only"
#endif

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/shared/rowwise_fp.h"
#include "kernels/shared/rowwise_tree.h"

namespace ampc::kernels::shared {

// Four consecutive elements p[0..4) as fp32.
__device__ __forceinline__ void load4(const float* p, bool aligned, float (&v)[4]) {
  if (aligned) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    for (int k = 0; k < 4; ++k) v[k] = p[k];
  }
}
template <typename T>  // Half, BFloat16
__device__ __forceinline__ void load4(const T* p, bool aligned, float (&v)[4]) {
  if (aligned) {
    const uint2 q = *reinterpret_cast<const uint2*>(p);
    const uint16_t b[4] = {static_cast<uint16_t>(q.x & 0xffffu), static_cast<uint16_t>(q.x >> 16),
                           static_cast<uint16_t>(q.y & 0xffffu), static_cast<uint16_t>(q.y >> 16)};
    for (int k = 0; k < 4; ++k) v[k] = Elem<T>::load(T{b[k]});
  } else {
    for (int k = 0; k < 4; ++k) v[k] = Elem<T>::load(p[k]);
  }
}

template <typename T>
__device__ __forceinline__ bool aligned4(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (4 * sizeof(T)) == 0;
}

// Thread t's partial over row[0..n) (rowwise_tree.h's partition); visit(acc, x) folds one value.
template <typename T, typename Acc, typename Visit>
__device__ __forceinline__ Acc thread_partial(const T* row, int64_t n, RowPlan plan, int t,
                                              Acc init, Visit visit) {
  Acc a = init;
  const int64_t stride = partition_stride(plan.threads, plan.vec);
  if (plan.vec == 4) {
    const bool aligned = aligned4(row);
    for (int64_t b = partition_first(t, 4); b < n; b += stride) {  // n % 4 == 0 here
      float v[4];
      load4(row + b, aligned, v);
      for (int k = 0; k < 4; ++k) a = visit(a, v[k]);
    }
  } else {
    for (int64_t b = partition_first(t, 1); b < n; b += stride) a = visit(a, load_f(row, b));
  }
  return a;
}

// Calls f(index, x) for every element of thread t's part of row[0..n) (any order is fine for
// elementwise outputs; this one reads like thread_partial).
template <typename T, typename F>
__device__ __forceinline__ void for_each_in_part(const T* row, int64_t n, RowPlan plan, int t,
                                                 F f) {
  const int64_t stride = partition_stride(plan.threads, plan.vec);
  if (plan.vec == 4) {
    const bool aligned = aligned4(row);
    for (int64_t b = partition_first(t, 4); b < n; b += stride) {
      float v[4];
      load4(row + b, aligned, v);
      for (int k = 0; k < 4; ++k) f(b + k, v[k]);
    }
  } else {
    for (int64_t b = partition_first(t, 1); b < n; b += stride) f(b, load_f(row, b));
  }
}

// A thread's part of a row as the row kernels see it: fold(init, visit) in the partition order
// and for_each(f(index, x)). StreamedRow reads global memory on every pass; CachedRow loads the
// part once into registers (rows of at most kRowCache * threads elements), which saves the
// second and third reads of softmax, layernorm and cross-entropy. Both visit the same values in
// the same order, so the results are the same bits.
template <typename T>
struct StreamedRow {
  const T* row;
  int64_t n;
  RowPlan plan;
  int t;
  template <typename Acc, typename Visit>
  __device__ __forceinline__ Acc fold(Acc init, Visit visit) const {
    return thread_partial(row, n, plan, t, init, visit);
  }
  template <typename F>
  __device__ __forceinline__ void for_each(F f) const {
    for_each_in_part(row, n, plan, t, f);
  }
};

constexpr int kRowCache = 32;  // elements per thread held in registers

template <typename T>
struct CachedRow {
  float v[kRowCache];
  int64_t n;
  RowPlan plan;
  int t;
  // Element i of the part: chunk i / vec, lane i % vec (vec is 4 or 1).
  __device__ __forceinline__ int64_t index(int i) const {
    return plan.vec == 4
               ? (static_cast<int64_t>(t) + static_cast<int64_t>(i / 4) * plan.threads) * 4 + i % 4
               : static_cast<int64_t>(t) + static_cast<int64_t>(i) * plan.threads;
  }
  __device__ __forceinline__ CachedRow(const T* row, int64_t n_, RowPlan plan_, int t_)
      : n(n_), plan(plan_), t(t_) {
    if (plan.vec == 4) {
      const bool aligned = aligned4(row);
#pragma unroll
      for (int c = 0; c < kRowCache / 4; ++c) {
        const int64_t b = index(c * 4);
        float q[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (b < n) load4(row + b, aligned, q);
#pragma unroll
        for (int k = 0; k < 4; ++k) v[c * 4 + k] = q[k];
      }
    } else {
#pragma unroll
      for (int i = 0; i < kRowCache; ++i) {
        const int64_t b = index(i);
        v[i] = b < n ? load_f(row, b) : 0.0f;
      }
    }
  }
  template <typename Acc, typename Visit>
  __device__ __forceinline__ Acc fold(Acc init, Visit visit) const {
    Acc a = init;
#pragma unroll
    for (int i = 0; i < kRowCache; ++i)
      if (index(i) < n) a = visit(a, v[i]);
    return a;
  }
  template <typename F>
  __device__ __forceinline__ void for_each(F f) const {
#pragma unroll
    for (int i = 0; i < kRowCache; ++i)
      if (index(i) < n) f(index(i), v[i]);
  }
};

// Whether rows of n fit CachedRow with `threads` threads.
__host__ __device__ __forceinline__ bool row_fits_cache(int64_t n, int threads) {
  return n <= static_cast<int64_t>(kRowCache) * threads;
}

// Loads and stores for operands whose element type is a run-time value (scale, bias, weight,
// statistics): f32, f16, bf16.
__device__ __forceinline__ float load_dyn(const void* p, int64_t i, DType t) {
  switch (t) {
    case DType::kFloat16:
      return load_f(static_cast<const Half*>(p), i);
    case DType::kBFloat16:
      return load_f(static_cast<const BFloat16*>(p), i);
    default:
      return load_f(static_cast<const float*>(p), i);
  }
}
__device__ __forceinline__ void store_dyn(void* p, int64_t i, DType t, float v) {
  switch (t) {
    case DType::kFloat16:
      return store_f(static_cast<Half*>(p), i, v);
    case DType::kBFloat16:
      return store_f(static_cast<BFloat16*>(p), i, v);
    default:
      return store_f(static_cast<float*>(p), i, v);
  }
}

// Host: throws ampc::Error when the last launch failed.
inline void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw Error(std::string(what) + ": kernel launch failed: " + cudaGetErrorString(e));
}

// Host: a grid size of `blocks`, refused beyond CUDA's limit.
inline unsigned grid_of(int64_t blocks, const char* what) {
  if (blocks > 0x7fffffffLL) {
    throw Error(std::string(what) + ": " + std::to_string(blocks) +
                " blocks exceed the grid limit");
  }
  return static_cast<unsigned>(blocks);
}

// Warp-per-row kernels (RowPlan threads == 32) run 8 rows per block of 256 threads; block
// kernels one row per block of `threads` (block_threads: their __launch_bounds__).
constexpr int kRowsPerWarpBlock = 8;
constexpr int block_threads(int row_threads) {
  return row_threads == kWarpSize ? kWarpSize * kRowsPerWarpBlock : row_threads;
}

// A row kernel's thread: its row (-1 past the last of `rows`; kRowsPerWarpBlock rows per block
// for warp rows, so whole warps leave together) and its index *t in the row's group.
template <int kThreads>
__device__ __forceinline__ int64_t block_row(int64_t rows, int* t) {
  constexpr int kRows = kThreads == kWarpSize ? kRowsPerWarpBlock : 1;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRows + threadIdx.x / kThreads;
  *t = threadIdx.x % kThreads;
  return row < rows ? row : -1;
}

// body(part) with thread t's part of the row xr of n elements: a CachedRow when the row fits
// (uniform across the block), else a StreamedRow. 512-thread rows (n >= 16384) never fit, so
// the cached variant is not compiled for them (it would cost registers).
template <int kThreads, typename T, typename Body>
__device__ __forceinline__ void with_row_part(const T* xr, int64_t n, int t, Body body) {
  const RowPlan plan{kThreads, row_plan(n).vec};
  if constexpr (kThreads != 512) {
    if (row_fits_cache(n, kThreads)) return body(CachedRow<T>(xr, n, plan, t));
  }
  body(StreamedRow<T>{xr, n, plan, t});
}

}  // namespace ampc::kernels::shared
