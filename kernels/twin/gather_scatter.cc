// CPU twin of kernels/cuda/gather_scatter.cu: Gather element by element, and ScatterND as the
// kernels' five steps (count tuples per row, exclusive scan, group, order within each row,
// fold per output element), each run sequentially.
#include "kernels/twin/gather_scatter.h"

#include <string>
#include <type_traits>

#include "kernels/shared/elementwise_dispatch.h"
#include "kernels/shared/index_math.h"
#include "kernels/shared/scatter_math.h"

namespace ampc::kernels::twin {

namespace sh = ampc::kernels::shared;
namespace dm = ampc::kernels::shared::dm;

namespace {

using dm::visit_index;

// The reduction's fold for storage type T (compute type ScatterElem<T>::Math) of output element
// (row r, column i): data, then the row's updates in tuple order.
template <typename T>
void fold_rows(const T* data, const T* updates, int64_t rows, int64_t slice, const int32_t* count,
               const int32_t* start, const int32_t* sorted, int32_t reduction, T* out) {
  using E = dm::ScatterElem<T>;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < slice; ++i) {
      const int64_t at = r * slice + i;
      auto acc = E::load(data[at]);
      for (int32_t q = start[r]; q < start[r] + count[r]; ++q)
        acc = dm::scatter_combine(reduction, acc, E::load(updates[sorted[q] * slice + i]));
      out[at] = E::store(acc);
    }
  }
}

}  // namespace

void gather(DType dtype, const void* data, int64_t outer, int64_t axis_dim, int64_t inner,
            DType index_dtype, const void* indices, int64_t num_indices, void* out,
            int32_t* bad_index) {
  const int64_t n = outer * num_indices * inner;
  dm::visit_gather(dtype, index_dtype, axis_dim, n, [&](auto tag, auto itag) {
    using U = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    const U* x = static_cast<const U*>(data);
    U* y = static_cast<U*>(out);
    bool bad = false;
    for (int64_t k = 0; k < n; ++k)
      y[k] = x[dm::gather_source<int64_t>(k, axis_dim, inner, num_indices,
                                          static_cast<const I*>(indices), &bad)];
    if (bad && bad_index) *bad_index = 1;
  });
}

void scatter_nd(DType dtype, const void* data, const std::vector<int64_t>& data_shape,
                DType index_dtype, const void* indices, int64_t num_tuples, int64_t depth,
                const void* updates, ScatterReduction reduction, void* out, void* workspace,
                int32_t* bad_index) {
  const dm::ScatterGeometry s = dm::scatter_geometry(data_shape, num_tuples, depth);
  const int32_t red = dm::check_scatter_type(dtype, static_cast<int32_t>(reduction));
  const dm::ScatterWorkspace w = dm::scatter_workspace(s.rows, num_tuples);
  const dm::ScatterArrays a = dm::scatter_arrays(workspace, w);
  int32_t *count = a.count, *start = a.start, *cursor = a.cursor, *row_of = a.row_of;
  int32_t *list = a.list, *sorted = a.sorted;
  for (int64_t r = 0; r < s.rows; ++r) count[r] = cursor[r] = 0;
  // 1. The row of every tuple, and the tuples per row.
  bool bad = false;
  visit_index(index_dtype, "scatter_nd", [&](auto itag) {
    using I = typename decltype(itag)::type;
    for (int64_t t = 0; t < num_tuples; ++t) {
      row_of[t] =
          static_cast<int32_t>(dm::tuple_row(s.index, static_cast<const I*>(indices), t, &bad));
      ++count[row_of[t]];
    }
  });
  if (bad && bad_index) *bad_index = 1;
  // 2. Exclusive prefix sums: where each row's tuples start.
  int32_t sum = 0;
  for (int64_t r = 0; r < s.rows; ++r) {
    start[r] = sum;
    sum += count[r];
  }
  // 3. Tuples grouped by row (the device fills each group in any order).
  for (int64_t t = 0; t < num_tuples; ++t)
    list[start[row_of[t]] + cursor[row_of[t]]++] = static_cast<int32_t>(t);
  // 4. Each group in tuple order.
  for (int64_t p = 0; p < num_tuples; ++p) {
    const int32_t t = list[p], r = row_of[t];
    sorted[start[r] + dm::rank_in_segment(list + start[r], count[r], t)] = t;
  }
  // 5. Every output element folds its row's updates.
  dm::visit_scatter_fold_type(dtype, red, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fold_rows(static_cast<const T*>(data), static_cast<const T*>(updates), s.rows, s.slice, count,
              start, sorted, red, static_cast<T*>(out));
  });
}

}  // namespace ampc::kernels::twin
