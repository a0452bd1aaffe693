// Per-element math of ScatterND (kernels/cuda/gather_scatter.cu, kernels/twin/gather_scatter.cc)
// with the CPU op's semantics (runtime/cpu/ops/tensor_indexing.cc's apply_update), compiled by
// nvcc and g++. The kernels make ScatterND deterministic: the tuples are counting-sorted by the
// data row (the first `depth` dimensions) they address, keeping their order, and each output
// element then folds its updates in that order, as the CPU op's sequential loop does.
#pragma once

#include <cstdint>
#include <type_traits>

#include "base/half.h"
#include "kernels/shared/elementwise_dispatch.h"
#include "kernels/shared/elementwise_int.h"
#include "kernels/shared/hd.h"
#include "kernels/shared/index_math.h"

namespace ampc::kernels::shared::dm {

// Reductions, numbered as kernels/cuda/gather_scatter.h's ScatterReduction.
enum Reduction : int32_t { kNone = 0, kAdd = 1, kMul = 2, kMax = 3, kMin = 4 };

// The row-major index over data's first `depth` dimensions that tuple t addresses; indices
// negative from the end, out of range clamped with *bad set (index_math.h's fix_index).
struct RowIndex {
  int32_t depth = 0;
  int64_t dims[kMaxDims] = {};
};

template <typename Index>
AMPC_HD int64_t tuple_row(const RowIndex& r, const Index* indices, int64_t t, bool* bad) {
  int64_t row = 0;
  for (int32_t j = 0; j < r.depth; ++j)
    row =
        row * r.dims[j] + fix_index(static_cast<int64_t>(indices[t * r.depth + j]), r.dims[j], bad);
  return row;
}

// The compute type of a scatter with a reduction: fp32 for 16-bit floats (the CPU op widens
// them and rounds once), the element type otherwise.
template <typename T>
using ScatterElem = shared::Elem<T>;

// dst op src as apply_update (none: src): + and * (integers wrap around, as the x86 code of the CPU
// op does), std::max(a, b) = a < b ? b : a, std::min(a, b) = b < a ? b : a. Floats round once per
// operation (never contracted).
template <typename M>
AMPC_HD M scatter_combine(int32_t reduction, M a, M b) {
  if (reduction == kNone) return b;
  if constexpr (std::is_integral_v<M>) {
    if (reduction == kAdd) return ew::arithmetic<ew::kAdd>(a, b);
    if (reduction == kMul) return ew::arithmetic<ew::kMul>(a, b);
  } else {
    if (reduction == kAdd) return add(a, b);
    if (reduction == kMul) return mul(a, b);
  }
  if (reduction == kMax) return a < b ? b : a;
  return b < a ? b : a;
}

// The position of t among the tuples of its row segment seg[0..len) (distinct tuple numbers):
// the number of smaller ones. Sorting a segment this way keeps the CPU op's order.
AMPC_HD int32_t rank_in_segment(const int32_t* seg, int32_t len, int32_t t) {
  int32_t r = 0;
  for (int32_t q = 0; q < len; ++q) r += seg[q] < t ? 1 : 0;
  return r;
}

// The workspace of ScatterND (int32 arrays, each 256-byte aligned): count[rows] (tuples per
// row), start[rows] (exclusive prefix sums), cursor[rows], row_of[tuples], list[tuples] (tuple
// numbers grouped by row), sorted[tuples] (the same, in order within each row).
struct ScatterWorkspace {
  int64_t count, start, cursor, row_of, list, sorted, bytes;
};

AMPC_HD int64_t align256(int64_t b) {
  return (b + 255) / 256 * 256;
}

AMPC_HD ScatterWorkspace scatter_workspace(int64_t rows, int64_t tuples) {
  ScatterWorkspace w;
  const int64_t r = align256(rows * 4), t = align256(tuples * 4);
  w.count = 0;
  w.start = r;
  w.cursor = 2 * r;
  w.row_of = 3 * r;
  w.list = 3 * r + t;
  w.sorted = 3 * r + 2 * t;
  w.bytes = 3 * r + 3 * t;
  return w;
}

// The workspace's int32 arrays at w's offsets.
struct ScatterArrays {
  int32_t *count, *start, *cursor, *row_of, *list, *sorted;
};

AMPC_HD ScatterArrays scatter_arrays(void* workspace, const ScatterWorkspace& w) {
  char* ws = static_cast<char*>(workspace);
  const auto at = [ws](int64_t offset) { return reinterpret_cast<int32_t*>(ws + offset); };
  return {at(w.count), at(w.start), at(w.cursor), at(w.row_of), at(w.list), at(w.sorted)};
}

// ---- Host side ----

// ScatterND's addressing for data_shape and index tuples of `depth` entries: rows (the
// addressable slices), slice (elements per row). Throws when the sizes do not fit the kernels.
struct ScatterGeometry {
  RowIndex index;
  int64_t rows = 1, slice = 1;
};

inline ScatterGeometry scatter_geometry(const Dims& data_shape, int64_t tuples, int64_t depth) {
  if (depth < 0 || depth > static_cast<int64_t>(data_shape.size()) || depth > kMaxDims)
    throw Error("scatter_nd: index tuples of " + std::to_string(depth) +
                " entries do not fit data of rank " + std::to_string(data_shape.size()));
  ScatterGeometry g;
  g.index.depth = static_cast<int32_t>(depth);
  for (size_t d = 0; d < data_shape.size(); ++d) {
    if (static_cast<int64_t>(d) < depth) {
      g.index.dims[d] = data_shape[d];
      g.rows *= data_shape[d];
    } else {
      g.slice *= data_shape[d];
    }
  }
  if (g.rows >= (int64_t(1) << 31) || tuples >= (int64_t(1) << 31) || tuples < 0)
    throw Error("scatter_nd: more than 2^31 rows or index tuples");
  if (tuples > 0 && g.rows == 0) throw Error("scatter_nd: indexing an empty tensor");
  return g;
}

// f(TypeTag<I>) for the index types of Gather and ScatterND: int32, int64.
template <typename F>
void visit_index(DType t, const char* what, F&& f) {
  if (t == DType::kInt32) return f(TypeTag<int32_t>{});
  if (t == DType::kInt64) return f(TypeTag<int64_t>{});
  throw Error(std::string(what) + ": indices of element type " + std::string(dtype_name(t)) +
              " are not supported (int32 or int64)");
}

// Gather's checks and types, for the kernel and its twin: indexing an empty axis throws, then
// f(TypeTag<U>, TypeTag<I>) with U the bit-moving type of dtype's size (the values are only
// moved) and I the index type. `out_numel`: outer * num_indices * inner.
template <typename F>
void visit_gather(DType dtype, DType index_dtype, int64_t axis_dim, int64_t out_numel, F&& f) {
  if (axis_dim <= 0 && out_numel > 0) throw Error("gather: indexing an empty axis");
  visit_bits(dtype, "gather", [&](auto tag) {
    visit_index(index_dtype, "gather", [&](auto itag) { f(tag, itag); });
  });
}

// f(TypeTag<T>) for the element types of a scatter with a reduction.
template <typename F>
void visit_scatter_type(DType t, F&& f) {
  switch (t) {
    case DType::kInt32:
      return f(TypeTag<int32_t>{});
    case DType::kInt64:
      return f(TypeTag<int64_t>{});
    default:
      if (!visit_float(t, f)) unsupported("scatter_nd with a reduction", t);
  }
}

// f(TypeTag<T>) for the fold of a scatter: the bit-moving type of the element's size for kNone
// (the values are only moved), else the element type (visit_scatter_type).
template <typename F>
void visit_scatter_fold_type(DType t, int32_t reduction, F&& f) {
  if (reduction == kNone) return visit_bits(t, "scatter_nd", f);
  visit_scatter_type(t, f);
}

// The reduction code, after checking that dtype supports it.
inline int32_t check_scatter_type(DType t, int32_t reduction) {
  if (reduction < kNone || reduction > kMin)
    throw Error("scatter_nd: unknown reduction " + std::to_string(reduction));
  if (reduction == kNone) {
    element_bytes(t == DType::kString ? 0 : dtype_size(t), "scatter_nd");
  } else {
    visit_scatter_type(t, [](auto) {});
  }
  return reduction;
}

}  // namespace ampc::kernels::shared::dm
