// Reductions. After merging axes (reduce_math.h's reduce_shape):
// - rows (inner == 1): a row per warp (n < 1024) or per block of 256 / 512 threads, in
//   rowwise_tree.h's order; with few rows each row is cut into pieces (segment_plan) whose
//   partial accumulators a warp then combines in order;
// - columns (inner > 1, e.g. [B*T, N] -> [N]): a thread per output column and piece of the
//   rows walks its rows in order, loads coalesced across the columns; pieces combined in order;
// - channels ([N, C, S] over N and S, reduce_math.h's channel_reduce): the rows kernel's
//   partials of the N * C rows, then a thread per channel combines them in order;
// - general (other sets of several reduced groups): a warp or block per output over the
//   reduced elements.
#include "kernels/cuda/reduce.h"

#include <string>

#include "kernels/shared/reduce_math.h"
#include "kernels/shared/rowwise_device.h"
#include "kernels/shared/rowwise_dispatch.h"

namespace ampc::kernels::cuda {
namespace {

namespace sh = kernels::shared;
using sh::ReduceKind;

struct Combine {
  ReduceKind k;
  __device__ float operator()(float a, float b) const { return sh::reduce_combine(k, a, b); }
};

// Rows: work item (o, s) = row o, piece s; the result (segments == 1 and not `partial`) or
// the partial (to ws).
template <typename T, int kThreads>
__global__ void __launch_bounds__(sh::block_threads(kThreads))
    reduce_rows(ReduceKind k, const T* x, T* y, float* ws, int64_t outer, int64_t n,
                sh::SegmentPlan seg, bool partial) {
  __shared__ float smem[sh::kWarpSize];
  constexpr int kRows = kThreads == sh::kWarpSize ? sh::kRowsPerWarpBlock : 1;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kRows + threadIdx.x / kThreads;
  if (item >= outer * seg.segments) return;
  const int64_t o = item / seg.segments, s = item % seg.segments;
  const int64_t start = s * seg.seg_len;
  const int64_t len = n - start < seg.seg_len ? n - start : seg.seg_len;
  const sh::RowPlan plan{kThreads, sh::row_plan(n).vec};
  float a =
      sh::thread_partial(x + o * n + start, len, plan, threadIdx.x % kThreads, sh::reduce_init(k),
                         [k](float acc, float v) { return sh::reduce_accumulate(k, acc, v); });
  a = sh::block_tree(a, kThreads, smem, Combine{k});
  if (threadIdx.x % kThreads != 0) return;
  if (seg.segments == 1 && !partial) {
    sh::store_f(y, o, sh::reduce_finish(k, a, n));
  } else {
    ws[item] = a;
  }
}

// A warp per row combines its pieces ws[o * segments ...] in the row order.
template <typename T>
__global__ void combine_rows(ReduceKind k, const float* ws, T* y, int64_t outer, int64_t n,
                             int64_t segments) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * sh::kRowsPerWarpBlock + threadIdx.x / 32;
  if (o >= outer) return;
  const sh::RowPlan plan{sh::kCombineThreads, 1};
  float a = sh::thread_partial(ws + o * segments, segments, plan, threadIdx.x % 32,
                               sh::reduce_init(k), Combine{k});
  a = sh::block_tree(a, 32, static_cast<float*>(nullptr), Combine{k});
  if (threadIdx.x % 32 == 0) sh::store_f(y, o, sh::reduce_finish(k, a, n));
}

// Columns: thread (o, s, i) walks rows [s * seg_len, ...) of column i of slab o.
template <typename T>
__global__ void reduce_columns(ReduceKind k, const T* x, T* y, float* ws, int64_t outer, int64_t n,
                               int64_t inner, sh::SegmentPlan seg) {
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= outer * seg.segments * inner) return;
  const int64_t i = id % inner, os = id / inner;
  const int64_t o = os / seg.segments, s = os % seg.segments;
  const int64_t start = s * seg.seg_len;
  const int64_t end = n < start + seg.seg_len ? n : start + seg.seg_len;
  float a = sh::reduce_init(k);
  const T* col = x + o * n * inner + i;
  for (int64_t r = start; r < end; ++r) a = sh::reduce_accumulate(k, a, sh::load_f(col, r * inner));
  if (seg.segments == 1) {
    sh::store_f(y, o * inner + i, sh::reduce_finish(k, a, n));
  } else {
    ws[id] = a;  // (o * segments + s) * inner + i
  }
}

template <typename T>
__global__ void combine_columns(ReduceKind k, const float* ws, T* y, int64_t outer, int64_t n,
                                int64_t inner, int64_t segments) {
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= outer * inner) return;
  const int64_t o = id / inner, i = id % inner;
  float a = sh::reduce_init(k);
  for (int64_t s = 0; s < segments; ++s)
    a = sh::reduce_combine(k, a, ws[(o * segments + s) * inner + i]);
  sh::store_f(y, id, sh::reduce_finish(k, a, n));
}

// Channels: a thread per channel folds the partials ws[(i * c + ch) * pieces + p] in the order
// i, p and finishes over the n * s elements.
template <typename T>
__global__ void combine_channels(ReduceKind k, const float* ws, T* y, sh::ChannelReduce ch) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= ch.c) return;
  const int64_t pieces = ch.seg.segments;
  float a = sh::reduce_init(k);
  for (int64_t i = 0; i < ch.n; ++i) {
    const float* row = ws + (i * ch.c + c) * pieces;
    for (int64_t p = 0; p < pieces; ++p) a = sh::reduce_combine(k, a, row[p]);
  }
  sh::store_f(y, c, sh::reduce_finish(k, a, ch.n * ch.s));
}

// General: output o over its g.n reduced elements, the row partition with vector width 1.
template <typename T, int kThreads>
__global__ void __launch_bounds__(sh::block_threads(kThreads))
    reduce_general(ReduceKind k, const T* x, T* y, sh::StridedReduce g) {
  __shared__ float smem[sh::kWarpSize];
  constexpr int kRows = kThreads == sh::kWarpSize ? sh::kRowsPerWarpBlock : 1;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kRows + threadIdx.x / kThreads;
  if (o >= g.outputs) return;
  const int t = threadIdx.x % kThreads;
  const T* base = x + sh::kept_offset(g, o);
  float a = sh::reduce_init(k);
  for (int64_t r = sh::partition_first(t, 1); r < g.n; r += kThreads)
    a = sh::reduce_accumulate(k, a, sh::load_f(base, sh::reduced_offset(g, r)));
  a = sh::block_tree(a, kThreads, smem, Combine{k});
  if (t == 0) sh::store_f(y, o, sh::reduce_finish(k, a, g.n));
}

// kernel<T, threads> for a row plan's thread count: 8 items per block for warps.
#define AMPC_ROW_LAUNCH(kernel, T, threads, items, stream, ...)                          \
  do {                                                                                   \
    if ((threads) == 32) {                                                               \
      kernel<T, 32><<<sh::grid_of(sh::ceil_div(items, sh::kRowsPerWarpBlock), "reduce"), \
                      32 * sh::kRowsPerWarpBlock, 0, stream>>>(__VA_ARGS__);             \
    } else if ((threads) == 256) {                                                       \
      kernel<T, 256><<<sh::grid_of(items, "reduce"), 256, 0, stream>>>(__VA_ARGS__);     \
    } else {                                                                             \
      kernel<T, 512><<<sh::grid_of(items, "reduce"), 512, 0, stream>>>(__VA_ARGS__);     \
    }                                                                                    \
  } while (0)

template <typename T>
void launch(ReduceKind k, const T* x, T* y, const sh::ReduceShape& s, float* ws,
            cudaStream_t stream) {
  if (const sh::ChannelReduce ch = sh::channel_reduce(s); ch.ok) {
    AMPC_ROW_LAUNCH(reduce_rows, T, sh::row_plan(ch.s).threads, sh::channel_partials(ch), stream, k,
                    x, y, ws, ch.n * ch.c, ch.s, ch.seg, true);
    sh::check_launch("reduce");
    combine_channels<T><<<sh::grid_of(sh::ceil_div(ch.c, sh::kColumnThreads), "reduce"),
                          sh::kColumnThreads, 0, stream>>>(k, ws, y, ch);
    sh::check_launch("reduce");
    return;
  }
  if (s.general) {
    const sh::StridedReduce g = sh::strided_reduce(s);
    if (g.outputs == 0) return;
    AMPC_ROW_LAUNCH(reduce_general, T, sh::row_plan(g.n).threads, g.outputs, stream, k, x, y, g);
    sh::check_launch("reduce");
    return;
  }
  if (s.outer * s.inner == 0) return;
  const sh::SegmentPlan seg = sh::segment_plan(s.outer, s.n, s.inner);
  if (s.inner == 1) {
    AMPC_ROW_LAUNCH(reduce_rows, T, sh::row_plan(s.n).threads, s.outer * seg.segments, stream, k, x,
                    y, ws, s.outer, s.n, seg, false);
    sh::check_launch("reduce");
    if (seg.segments == 1) return;
    combine_rows<T>
        <<<sh::grid_of(sh::ceil_div(s.outer, sh::kRowsPerWarpBlock), "reduce"),
           32 * sh::kRowsPerWarpBlock, 0, stream>>>(k, ws, y, s.outer, s.n, seg.segments);
    sh::check_launch("reduce");
    return;
  }
  const int64_t threads = s.outer * seg.segments * s.inner;
  reduce_columns<T><<<sh::grid_of(sh::ceil_div(threads, sh::kColumnThreads), "reduce"),
                      sh::kColumnThreads, 0, stream>>>(k, x, y, ws, s.outer, s.n, s.inner, seg);
  sh::check_launch("reduce");
  if (seg.segments == 1) return;
  combine_columns<T>
      <<<sh::grid_of(sh::ceil_div(s.outer * s.inner, sh::kColumnThreads), "reduce"),
         sh::kColumnThreads, 0, stream>>>(k, ws, y, s.outer, s.n, s.inner, seg.segments);
  sh::check_launch("reduce");
}

}  // namespace

void reduce(ReduceOp op, DType dtype, const void* x, void* y, int rank, const int64_t* dims,
            const bool* reduced, void* workspace, cudaStream_t stream) {
  const sh::ReduceShape s = sh::checked_reduce_shape(rank, dims, reduced);
  if (static_cast<int32_t>(op) < 0 || static_cast<int32_t>(op) > 8) {
    throw Error("reduce: unknown reduction " + std::to_string(static_cast<int32_t>(op)));
  }
  sh::dispatch_float_types(dtype, "reduce", [&](auto tag) {
    using T = decltype(tag);
    launch(static_cast<ReduceKind>(op), static_cast<const T*>(x), static_cast<T*>(y), s,
           static_cast<float*>(workspace), stream);
  });
}

}  // namespace ampc::kernels::cuda
