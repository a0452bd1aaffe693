// Data movement over raw buffers: N-d strided copies (transpose, slice, expand, tile, concat
// and split are all one of these) and block gathers. Element types are plain values copied by
// assignment, so the same templates move fixed-width elements and std::string.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/broadcast.h"

namespace ampc::kernels::cpu {

// dst[sum i_j * dst_strides[j]] = src[sum i_j * src_strides[j]] for every index i of `shape`.
// Strides are in elements and may be negative (reversed slices) or 0 (broadcast reads).
template <typename T>
void strided_copy(Shape shape, const T* src, Shape src_strides, T* dst, Shape dst_strides) {
  for (int64_t d : shape) {
    if (d == 0) return;
  }
  collapse_dims(shape, {&src_strides, &dst_strides});
  const int64_t n = shape.back();
  const int64_t ss = src_strides.back(), ds = dst_strides.back();
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  auto run_row = [&](int64_t r) {
    int64_t so = 0, dof = 0;
    for (size_t d = shape.size() - 1; d-- > 0;) {
      const int64_t i = r % shape[d];
      r /= shape[d];
      so += i * src_strides[d];
      dof += i * dst_strides[d];
    }
    const T* s = src + so;
    T* t = dst + dof;
    if constexpr (std::is_trivially_copyable_v<T>) {
      if (ss == 1 && ds == 1) {
        std::memcpy(t, s, static_cast<size_t>(n) * sizeof(T));
        return;
      }
    }
    if (ss == 0) {
      for (int64_t i = 0; i < n; ++i) t[i * ds] = s[0];
    } else {
      for (int64_t i = 0; i < n; ++i) t[i * ds] = s[i * ss];
    }
  };
  if (rows * n < kParallelThreshold || rows == 1) {
    for (int64_t r = 0; r < rows; ++r) run_row(r);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) run_row(r);
  }
}

// Gather along one axis of a tensor viewed as [outer, axis_dim, inner]:
// dst[o, j, :] = src[o, idx[j], :] for j < num_idx. Indices must be in [0, axis_dim).
template <typename T>
void gather_axis(const T* src, int64_t outer, int64_t axis_dim, int64_t inner, const int64_t* idx,
                 int64_t num_idx, T* dst) {
  const int64_t blocks = outer * num_idx;
  auto run = [&](int64_t k) {
    const int64_t o = k / num_idx, j = k % num_idx;
    const T* s = src + (o * axis_dim + idx[j]) * inner;
    std::copy(s, s + inner, dst + k * inner);
  };
  if (blocks * inner < kParallelThreshold) {
    for (int64_t k = 0; k < blocks; ++k) run(k);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < blocks; ++k) run(k);
  }
}

}  // namespace ampc::kernels::cpu
