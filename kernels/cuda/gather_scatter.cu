// Gather and ScatterND (gather_scatter.h).
// Gather: one thread per output element (grid-stride), rows of 16, 8 or 4 bytes moved as words
// when the row size and pointers allow.
// ScatterND, deterministic (the CPU op's sequential order) in five steps over an int32
// workspace (scatter_math.h): 1. each tuple's destination row and a count per row (atomics);
// 2. exclusive prefix sums of the counts (one block); 3. tuples grouped by row (atomics: any
// order within a group); 4. each group put in tuple order (an element's rank = the group's
// smaller tuple numbers: quadratic in a group's size, which is the number of times one row is
// addressed); 5. one thread per output element folds data and its row's updates in order.
#include <cstdint>
#include <string>

#include "kernels/cuda/data_launch.cuh"
#include "kernels/cuda/gather_scatter.h"
#include "kernels/shared/elementwise_dispatch.h"
#include "kernels/shared/index_math.h"
#include "kernels/shared/scatter_math.h"

namespace ampc::kernels::cuda {

namespace sh = ampc::kernels::shared;
namespace dm = ampc::kernels::shared::dm;
using detail::grid_for;
using detail::kThreads;

namespace {

using dm::visit_index;

template <typename U, typename I, typename K>
__global__ void gather_kernel(const U* __restrict__ data, int64_t axis_dim, int64_t inner,
                              const I* __restrict__ indices, int64_t num_indices, int64_t total,
                              U* __restrict__ out, int32_t* bad_index) {
  bool bad = false;
  AMPC_GRID_STRIDE(K, k, total) {
    out[k] = data[dm::gather_source(k, axis_dim, inner, num_indices, indices, &bad)];
  }
  if (bad && bad_index) *bad_index = 1;
}

template <typename U, typename I>
void launch_gather(const void* data, int64_t outer, int64_t axis_dim, int64_t inner,
                   const void* indices, int64_t num_indices, void* out, int32_t* bad_index,
                   cudaStream_t stream) {
  const int64_t total = outer * num_indices * inner;
  if (total < (int64_t(1) << 31)) {
    gather_kernel<U, I, uint32_t><<<grid_for(total), kThreads, 0, stream>>>(
        static_cast<const U*>(data), axis_dim, inner, static_cast<const I*>(indices), num_indices,
        total, static_cast<U*>(out), bad_index);
  } else {
    gather_kernel<U, I, int64_t><<<grid_for(total), kThreads, 0, stream>>>(
        static_cast<const U*>(data), axis_dim, inner, static_cast<const I*>(indices), num_indices,
        total, static_cast<U*>(out), bad_index);
  }
  detail::check_launch("gather");
}

// Step 1.
template <typename I>
__global__ void scatter_rows_kernel(dm::RowIndex r, const I* __restrict__ indices, int64_t tuples,
                                    int32_t* row_of, int32_t* count, int32_t* bad_index) {
  bool bad = false;
  AMPC_GRID_STRIDE(int64_t, t, tuples) {
    const int32_t row = static_cast<int32_t>(dm::tuple_row(r, indices, t, &bad));
    row_of[t] = row;
    atomicAdd(count + row, 1);
  }
  if (bad && bad_index) *bad_index = 1;
}

// Step 2: one block of kScanThreads; thread t scans a contiguous run of rows.
constexpr int kScanThreads = 1024;
__global__ void scatter_scan_kernel(const int32_t* __restrict__ count, int64_t rows,
                                    int32_t* __restrict__ start) {
  __shared__ int32_t run_total[kScanThreads];
  const int t = threadIdx.x;
  const int64_t per = (rows + kScanThreads - 1) / kScanThreads;
  const int64_t begin = t * per < rows ? t * per : rows;
  const int64_t end = begin + per < rows ? begin + per : rows;
  int32_t s = 0;
  for (int64_t r = begin; r < end; ++r) s += count[r];
  run_total[t] = s;
  __syncthreads();
  if (t == 0) {
    int32_t acc = 0;
    for (int k = 0; k < kScanThreads; ++k) {
      const int32_t v = run_total[k];
      run_total[k] = acc;
      acc += v;
    }
  }
  __syncthreads();
  s = run_total[t];
  for (int64_t r = begin; r < end; ++r) {
    start[r] = s;
    s += count[r];
  }
}

// Step 3.
__global__ void scatter_group_kernel(const int32_t* __restrict__ row_of, int64_t tuples,
                                     const int32_t* __restrict__ start, int32_t* cursor,
                                     int32_t* __restrict__ list) {
  AMPC_GRID_STRIDE(int64_t, t, tuples) {
    const int32_t row = row_of[t];
    list[start[row] + atomicAdd(cursor + row, 1)] = static_cast<int32_t>(t);
  }
}

// Step 4.
__global__ void scatter_order_kernel(const int32_t* __restrict__ row_of, int64_t tuples,
                                     const int32_t* __restrict__ start,
                                     const int32_t* __restrict__ count,
                                     const int32_t* __restrict__ list,
                                     int32_t* __restrict__ sorted) {
  AMPC_GRID_STRIDE(int64_t, p, tuples) {
    const int32_t t = list[p], r = row_of[t];
    sorted[start[r] + dm::rank_in_segment(list + start[r], count[r], t)] = t;
  }
}

// Step 5.
template <typename T, typename K>
__global__ void scatter_fold_kernel(const T* __restrict__ data, const T* __restrict__ updates,
                                    int64_t rows, int64_t slice, const int32_t* __restrict__ count,
                                    const int32_t* __restrict__ start,
                                    const int32_t* __restrict__ sorted, int32_t reduction,
                                    T* __restrict__ out) {
  using E = dm::ScatterElem<T>;
  AMPC_GRID_STRIDE(K, at, rows * slice) {
    const K r = at / static_cast<K>(slice);
    const int64_t i = static_cast<int64_t>(at - r * static_cast<K>(slice));
    auto acc = E::load(data[at]);
    const int32_t b = start[r], e = b + count[r];
    for (int32_t q = b; q < e; ++q)
      acc = dm::scatter_combine(reduction, acc, E::load(updates[sorted[q] * slice + i]));
    out[at] = E::store(acc);
  }
}

template <typename T>
void launch_fold(const void* data, const void* updates, int64_t rows, int64_t slice,
                 const int32_t* count, const int32_t* start, const int32_t* sorted,
                 int32_t reduction, void* out, cudaStream_t stream) {
  if (rows * slice < (int64_t(1) << 31)) {
    scatter_fold_kernel<T, uint32_t><<<grid_for(rows * slice), kThreads, 0, stream>>>(
        static_cast<const T*>(data), static_cast<const T*>(updates), rows, slice, count, start,
        sorted, reduction, static_cast<T*>(out));
  } else {
    scatter_fold_kernel<T, int64_t><<<grid_for(rows * slice), kThreads, 0, stream>>>(
        static_cast<const T*>(data), static_cast<const T*>(updates), rows, slice, count, start,
        sorted, reduction, static_cast<T*>(out));
  }
  detail::check_launch("scatter_nd (fold)");
}

}  // namespace

void gather(DType dtype, const void* data, int64_t outer, int64_t axis_dim, int64_t inner,
            DType index_dtype, const void* indices, int64_t num_indices, void* out,
            int32_t* bad_index, cudaStream_t stream) {
  const int64_t out_numel = outer * num_indices * inner;
  dm::visit_gather(dtype, index_dtype, axis_dim, out_numel, [&](auto tag, auto itag) {
    using U = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    if (out_numel == 0) return;
    // Rows moved as words: inner elements of sizeof(U) bytes -> inner * sizeof(U) / word.
    const int64_t row_bytes = inner * static_cast<int64_t>(sizeof(U));
    auto fits = [&](int64_t word) {
      return static_cast<int64_t>(sizeof(U)) < word && row_bytes % word == 0 &&
             reinterpret_cast<uintptr_t>(data) % word == 0 &&
             reinterpret_cast<uintptr_t>(out) % word == 0;
    };
    if (fits(16))
      return launch_gather<uint4, I>(data, outer, axis_dim, row_bytes / 16, indices, num_indices,
                                     out, bad_index, stream);
    if (fits(8))
      return launch_gather<uint2, I>(data, outer, axis_dim, row_bytes / 8, indices, num_indices,
                                     out, bad_index, stream);
    if (fits(4))
      return launch_gather<uint32_t, I>(data, outer, axis_dim, row_bytes / 4, indices, num_indices,
                                        out, bad_index, stream);
    launch_gather<U, I>(data, outer, axis_dim, inner, indices, num_indices, out, bad_index, stream);
  });
}

void scatter_nd(DType dtype, const void* data, const std::vector<int64_t>& data_shape,
                DType index_dtype, const void* indices, int64_t num_tuples, int64_t depth,
                const void* updates, ScatterReduction reduction, void* out, void* workspace,
                int32_t* bad_index, cudaStream_t stream) {
  const dm::ScatterGeometry s = dm::scatter_geometry(data_shape, num_tuples, depth);
  const int32_t red = dm::check_scatter_type(dtype, static_cast<int32_t>(reduction));
  visit_index(index_dtype, "scatter_nd", [](auto) {});
  if (s.rows * s.slice == 0) return;
  const dm::ScatterWorkspace w = dm::scatter_workspace(s.rows, num_tuples);
  const dm::ScatterArrays a = dm::scatter_arrays(workspace, w);
  // count and cursor are adjacent (count, start, cursor): clear both.
  detail::check_call(cudaMemsetAsync(a.count, 0, static_cast<size_t>(w.row_of), stream),
                     "scatter_nd (clear)");
  if (num_tuples > 0) {
    visit_index(index_dtype, "scatter_nd", [&](auto itag) {
      using I = typename decltype(itag)::type;
      scatter_rows_kernel<I><<<grid_for(num_tuples), kThreads, 0, stream>>>(
          s.index, static_cast<const I*>(indices), num_tuples, a.row_of, a.count, bad_index);
      detail::check_launch("scatter_nd (rows)");
    });
    scatter_scan_kernel<<<1, kScanThreads, 0, stream>>>(a.count, s.rows, a.start);
    detail::check_launch("scatter_nd (scan)");
    scatter_group_kernel<<<grid_for(num_tuples), kThreads, 0, stream>>>(a.row_of, num_tuples,
                                                                        a.start, a.cursor, a.list);
    detail::check_launch("scatter_nd (group)");
    scatter_order_kernel<<<grid_for(num_tuples), kThreads, 0, stream>>>(
        a.row_of, num_tuples, a.start, a.count, a.list, a.sorted);
    detail::check_launch("scatter_nd (order)");
  }
  dm::visit_scatter_fold_type(dtype, red, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_fold<T>(data, updates, s.rows, s.slice, a.count, a.start, a.sorted, red, out, stream);
  });
}

}  // namespace ampc::kernels::cuda
