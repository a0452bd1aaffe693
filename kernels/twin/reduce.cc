// CPU twin of kernels/cuda/reduce.cu, and the CPU backend's ReduceSum ... ReduceSumSquare on
// float data: reduce_math.h's functions in the kernels' partition and order (each piece of a
// row as a block reduces it, each column as its thread walks the rows). The order is fixed per
// output, so the loops over independent outputs, pieces and column blocks run in parallel
// (OpenMP) without changing a bit. f64 accumulates in double (the CUDA kernels take no f64).
#include "kernels/twin/reduce.h"

#include <algorithm>
#include <type_traits>

#include "kernels/shared/reduce_math.h"
#include "kernels/shared/rowwise_dispatch.h"
#include "kernels/shared/rowwise_tree.h"

namespace ampc::kernels::twin {
namespace {

namespace sh = kernels::shared;
using sh::ReduceKind;

// Loops over fewer elements than this stay on one thread.
constexpr int64_t kParallelWork = 1 << 16;
// Output columns that one task of a column reduction accumulates side by side.
constexpr int64_t kColumnBlock = 256;

// The accumulator of storage type T: float, or double for f64.
template <typename T>
using Acc = typename sh::Elem<T>::Math;

template <typename T>
Acc<T> load(const T* p, int64_t i) {
  return sh::Elem<T>::load(p[i]);
}
template <typename T>
void store(T* p, int64_t i, Acc<T> v) {
  p[i] = sh::Elem<T>::store(v);
}

// f(integral_constant<kind>): the kind as a compile-time constant, so that reduce_math.h's
// per-element switch folds away in the loops.
template <typename F>
void with_kind(ReduceKind k, F&& f) {
  using K = ReduceKind;
  switch (k) {
    case K::kSum:
      return f(std::integral_constant<K, K::kSum>{});
    case K::kMean:
      return f(std::integral_constant<K, K::kMean>{});
    case K::kProd:
      return f(std::integral_constant<K, K::kProd>{});
    case K::kMax:
      return f(std::integral_constant<K, K::kMax>{});
    case K::kMin:
      return f(std::integral_constant<K, K::kMin>{});
    case K::kL1:
      return f(std::integral_constant<K, K::kL1>{});
    case K::kL2:
      return f(std::integral_constant<K, K::kL2>{});
    case K::kLogSum:
      return f(std::integral_constant<K, K::kLogSum>{});
    case K::kSumSquare:
      return f(std::integral_constant<K, K::kSumSquare>{});
  }
  throw Error("reduce: unknown reduction " + std::to_string(static_cast<int>(k)));
}

template <ReduceKind K, typename M>
M combine(M a, M b) {
  return sh::reduce_combine(K, a, b);
}

// A block's reduction of row[0, len) with the partition of `plan`: sh::row_reduce_host's
// partials (thread t folds elements t*V .. t*V+V-1, then the same T*V further on) walked in
// element order, so that the row is read contiguously; then the tree.
template <ReduceKind K, typename T>
Acc<T> block_reduce(const sh::RowPlan& plan, const T* row, int64_t len) {
  using M = Acc<T>;
  M v[1024];
  const int threads = plan.threads, vec = plan.vec;
  for (int t = 0; t < threads; ++t) v[t] = sh::reduce_init<M>(K);
  const int64_t round = sh::partition_stride(threads, vec);
  for (int64_t b = 0; b < len; b += round) {
    const T* r = row + b;
    if (b + round <= len) {
      for (int t = 0; t < threads; ++t)
        for (int k = 0; k < vec; ++k) v[t] = sh::reduce_accumulate(K, v[t], load(r, t * vec + k));
    } else {
      for (int64_t e = 0; e < len - b; ++e)
        v[e / vec] = sh::reduce_accumulate(K, v[e / vec], load(r, e));
    }
  }
  return sh::tree_host(v, threads, combine<K, M>);
}

// inner == 1: rows, each split into pieces that a block reduces; a warp combines the pieces.
template <ReduceKind K, typename T>
void reduce_rows(const T* x, T* y, int64_t outer, int64_t n, Acc<T>* ws) {
  using M = Acc<T>;
  const sh::SegmentPlan seg = sh::segment_plan(outer, n, 1);
  const sh::RowPlan plan = sh::row_plan(n);
  const bool par = outer * n > kParallelWork;
  if (seg.segments == 1) {
#pragma omp parallel for if (par)
    for (int64_t o = 0; o < outer; ++o)
      store(y, o, sh::reduce_finish(K, block_reduce<K>(plan, x + o * n, n), n));
    return;
  }
  const int64_t pieces = outer * seg.segments;
#pragma omp parallel for if (par)
  for (int64_t p = 0; p < pieces; ++p) {
    const int64_t o = p / seg.segments, start = (p % seg.segments) * seg.seg_len;
    ws[p] = block_reduce<K>(plan, x + o * n + start, std::min(n - start, seg.seg_len));
  }
#pragma omp parallel for if (pieces > kParallelWork)
  for (int64_t o = 0; o < outer; ++o) {
    const M* parts = ws + o * seg.segments;
    const M a = sh::row_reduce_host(
        sh::RowPlan{sh::kCombineThreads, 1}, seg.segments, sh::reduce_init<M>(K),
        [parts](M acc, int64_t s) { return combine<K>(acc, parts[s]); }, combine<K, M>);
    store(y, o, sh::reduce_finish(K, a, n));
  }
}

// Columns [i0, i1) of slab o over rows [r0, r1), as the kernel's column threads walk them (each
// column's rows in order): acc[i - i0].
template <ReduceKind K, typename T>
void column_partials(const T* x, int64_t n, int64_t inner, int64_t o, int64_t r0, int64_t r1,
                     int64_t i0, int64_t i1, Acc<T>* acc) {
  for (int64_t i = i0; i < i1; ++i) acc[i - i0] = sh::reduce_init<Acc<T>>(K);
  for (int64_t r = r0; r < r1; ++r) {
    const T* row = x + (o * n + r) * inner;
    for (int64_t i = i0; i < i1; ++i)
      acc[i - i0] = sh::reduce_accumulate(K, acc[i - i0], load(row, i));
  }
}

// inner > 1: a thread per output column and piece of the rows, walking its rows in order;
// then a thread per output combines the pieces in order.
template <ReduceKind K, typename T>
void reduce_columns(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, Acc<T>* ws) {
  using M = Acc<T>;
  const sh::SegmentPlan seg = sh::segment_plan(outer, n, inner);
  const int64_t blocks = sh::ceil_div(inner, kColumnBlock);
  const bool par = outer * n * inner > kParallelWork;
  if (seg.segments == 1) {
#pragma omp parallel for if (par)
    for (int64_t t = 0; t < outer * blocks; ++t) {
      const int64_t o = t / blocks, i0 = (t % blocks) * kColumnBlock;
      const int64_t i1 = std::min(inner, i0 + kColumnBlock);
      M acc[kColumnBlock];
      column_partials<K>(x, n, inner, o, 0, n, i0, i1, acc);
      for (int64_t i = i0; i < i1; ++i)
        store(y, o * inner + i, sh::reduce_finish(K, acc[i - i0], n));
    }
    return;
  }
  // Partials [outer, segments, inner] in the workspace, then the pieces combined in order.
  const int64_t tasks = outer * seg.segments * blocks;
#pragma omp parallel for if (par)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t o = t / (seg.segments * blocks), s = t / blocks % seg.segments;
    const int64_t i0 = (t % blocks) * kColumnBlock, i1 = std::min(inner, i0 + kColumnBlock);
    const int64_t start = s * seg.seg_len, end = std::min(n, start + seg.seg_len);
    column_partials<K>(x, n, inner, o, start, end, i0, i1,
                       ws + (o * seg.segments + s) * inner + i0);
  }
#pragma omp parallel for if (outer * inner * seg.segments > kParallelWork)
  for (int64_t t = 0; t < outer * inner; ++t) {
    const int64_t o = t / inner, i = t % inner;
    M a = sh::reduce_init<M>(K);
    for (int64_t s = 0; s < seg.segments; ++s)
      a = combine<K>(a, ws[(o * seg.segments + s) * inner + i]);
    store(y, t, sh::reduce_finish(K, a, n));
  }
}

// [N, C, S] over N and S: the rows' partials (as reduce_rows' pieces, never finished), then
// a thread per channel combines them in the order row, piece.
template <ReduceKind K, typename T>
void reduce_channels(const T* x, T* y, const sh::ChannelReduce& ch, Acc<T>* ws) {
  using M = Acc<T>;
  const sh::RowPlan plan = sh::row_plan(ch.s);
  const int64_t pieces = ch.seg.segments, rows = ch.n * ch.c;
#pragma omp parallel for if (rows * ch.s > kParallelWork)
  for (int64_t t = 0; t < rows * pieces; ++t) {
    const int64_t o = t / pieces, start = (t % pieces) * ch.seg.seg_len;
    ws[t] = block_reduce<K>(plan, x + o * ch.s + start, std::min(ch.s - start, ch.seg.seg_len));
  }
#pragma omp parallel for if (rows * pieces > kParallelWork)
  for (int64_t c = 0; c < ch.c; ++c) {
    M a = sh::reduce_init<M>(K);
    for (int64_t i = 0; i < ch.n; ++i) {
      for (int64_t p = 0; p < pieces; ++p) a = combine<K>(a, ws[(i * ch.c + c) * pieces + p]);
    }
    store(y, c, sh::reduce_finish(K, a, ch.n * ch.s));
  }
}

// Several reduced groups: a block per output walks the reduced elements (flat index over the
// reduced axes, last fastest) with the row partition of vector width 1.
template <ReduceKind K, typename T>
void reduce_general(const T* x, T* y, const sh::ReduceShape& s) {
  using M = Acc<T>;
  const sh::StridedReduce g = sh::strided_reduce(s);
  const sh::RowPlan plan{sh::row_plan(g.n).threads, 1};
#pragma omp parallel for if (g.outputs * g.n > kParallelWork)
  for (int64_t o = 0; o < g.outputs; ++o) {
    const int64_t base = sh::kept_offset(g, o);
    const M a = sh::row_reduce_host(
        plan, g.n, sh::reduce_init<M>(K),
        [&](M acc, int64_t r) {
          return sh::reduce_accumulate(K, acc, load(x, base + sh::reduced_offset(g, r)));
        },
        combine<K, M>);
    store(y, o, sh::reduce_finish(K, a, g.n));
  }
}

}  // namespace

void reduce(ReduceOp op, DType dtype, const void* x, void* y, int rank, const int64_t* dims,
            const bool* reduced, void* workspace) {
  const sh::ReduceShape s = sh::checked_reduce_shape(rank, dims, reduced);
  sh::dispatch_float_types_f64(dtype, "reduce", [&](auto tag) {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    auto* ws = static_cast<Acc<T>*>(workspace);
    with_kind(static_cast<ReduceKind>(op), [&](auto kind) {
      constexpr ReduceKind K = decltype(kind)::value;
      if (const sh::ChannelReduce ch = sh::channel_reduce(s); ch.ok)
        return reduce_channels<K>(xt, yt, ch, ws);
      if (s.general) return reduce_general<K>(xt, yt, s);
      if (s.outer * s.inner == 0) return;
      if (s.inner == 1) return reduce_rows<K>(xt, yt, s.outer, s.n, ws);
      reduce_columns<K>(xt, yt, s.outer, s.n, s.inner, ws);
    });
  });
}

}  // namespace ampc::kernels::twin
