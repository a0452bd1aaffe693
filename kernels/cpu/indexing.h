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
namespace detail {

// Runs fn(offsets of dims [0, outer_dims)) for every index of those dims, in parallel when
// `work` elements are moved in all.
template <typename Fn>
void for_each_outer(const Shape& shape, size_t outer_dims, const Shape& src_strides,
                    const Shape& dst_strides, int64_t work, Fn&& fn) {
  int64_t rows = 1;
  for (size_t d = 0; d < outer_dims; ++d) rows *= shape[d];
  auto run = [&](int64_t r) {
    int64_t so = 0, dof = 0;
    for (size_t d = outer_dims; d-- > 0;) {
      const int64_t i = r % shape[d];
      r /= shape[d];
      so += i * src_strides[d];
      dof += i * dst_strides[d];
    }
    fn(so, dof);
  };
  if (work < kParallelThreshold || rows == 1) {
    for (int64_t r = 0; r < rows; ++r) run(r);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) run(r);
  }
}

}  // namespace detail

// dst[sum i_j * dst_strides[j]] = src[sum i_j * src_strides[j]] for every index i of `shape`.
// Strides are in elements and may be negative (reversed slices) or 0 (broadcast reads).
template <typename T>
void strided_copy(Shape shape, const T* src, Shape src_strides, T* dst, Shape dst_strides) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel == 0) return;
  collapse_dims(shape, {&src_strides, &dst_strides});
  const size_t rank = shape.size();
  // A transpose-like copy (the source is contiguous along another dimension than the
  // destination): move that dimension next to the last and copy [P, N] blocks in tiles so
  // that both sides stay in cache.
  if (rank >= 2 && src_strides.back() != 1 && dst_strides.back() == 1) {
    for (size_t p = 0; p + 1 < rank; ++p) {
      if (src_strides[p] != 1) continue;
      for (Shape* v : {&shape, &src_strides, &dst_strides}) {
        std::rotate(v->begin() + p, v->begin() + p + 1, v->end() - 1);
      }
      const int64_t rows = shape[rank - 2], cols = shape[rank - 1];
      const int64_t sr = src_strides[rank - 2], sc = src_strides[rank - 1];
      const int64_t dr = dst_strides[rank - 2];
      constexpr int64_t kTile = 32;
      detail::for_each_outer(
          shape, rank - 2, src_strides, dst_strides, numel, [&](int64_t so, int64_t dof) {
            for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
              for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
                const int64_t i1 = std::min(rows, i0 + kTile), j1 = std::min(cols, j0 + kTile);
                for (int64_t i = i0; i < i1; ++i) {
                  for (int64_t j = j0; j < j1; ++j)
                    dst[dof + i * dr + j] = src[so + i * sr + j * sc];
                }
              }
            }
          });
      return;
    }
  }
  const int64_t n = shape.back();
  const int64_t ss = src_strides.back(), ds = dst_strides.back();
  detail::for_each_outer(shape, rank - 1, src_strides, dst_strides, numel,
                         [&](int64_t so, int64_t dof) {
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
                         });
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
