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
#include "kernels/twin/row_avx512.h"

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

// Thread partials of a block's reduction of row[0, len) with the partition of `plan`
// (sh::row_reduce_host's: thread t folds elements t*V .. t*V+V-1, then the same T*V further
// on), walked in element order so that the row is read contiguously. Sets v[0, live), live
// being the number of threads that get an element at all.
template <ReduceKind K, typename T>
int thread_partials(const sh::RowPlan& plan, const T* row, int64_t len, Acc<T>* v) {
  const int threads = plan.threads, vec = plan.vec;
  const int64_t round = sh::partition_stride(threads, vec);
  const int live = static_cast<int>(std::min<int64_t>(threads, sh::ceil_div(len, vec)));
  for (int t = 0; t < live; ++t) v[t] = sh::reduce_init<Acc<T>>(K);
  int64_t b = 0;
  for (; b + round <= len; b += round) {
    const T* r = row + b;
    // Element k of every thread, then k + 1: each thread's order, and the threads' chains
    // side by side in vector lanes.
    for (int k = 0; k < vec; ++k)
      for (int t = 0; t < threads; ++t) v[t] = sh::reduce_accumulate(K, v[t], load(r, t * vec + k));
  }
  const int64_t left = len - b;  // the last, partial round: thread t's elements t*V .. left
  for (int t = 0; static_cast<int64_t>(t) * vec < left; ++t) {
    const int64_t first = static_cast<int64_t>(t) * vec, end = std::min(left, first + vec);
    for (int64_t e = first; e < end; ++e) v[t] = sh::reduce_accumulate(K, v[t], load(row + b, e));
  }
  return live;
}

// A block's reduction of row[0, len): the thread partials, then the tree. A warp (rows under
// 1024 elements) combines only the live partials' pairs: a pair of two `init` values gives
// `init` back for every reduction kind, the other pairs are combined as sh::tree_host does.
// Short rows (a channel reduction over small spatial sizes) leave most threads empty.
template <ReduceKind K, typename T>
Acc<T> block_reduce(const sh::RowPlan& plan, const T* row, int64_t len) {
  using M = Acc<T>;
  const M init = sh::reduce_init<M>(K);
  if (plan.threads == sh::kWarpSize) {
    M v[sh::kWarpSize];
    const int live = thread_partials<K>(plan, row, len, v);
    return sh::warp_tree_host_live(v, sh::kWarpSize, live, init, combine<K, M>);
  }
  M v[1024];
  const int live = thread_partials<K>(plan, row, len, v);
  for (int t = live; t < plan.threads; ++t) v[t] = init;
  return sh::tree_host(v, plan.threads, combine<K, M>);
}

// block_reduce of `rows` rows of `len` elements (row o at x + o * stride) that a warp each
// reduces (len < 1024), kRowLanes rows side by side: lane l of every step is row l's step of
// block_reduce, so each row gets block_reduce's bits, while the steps run as vector operations
// across rows instead of a short, branchy walk per row.
constexpr int kRowLanes = 16;

template <ReduceKind K, typename T>
void warp_reduce_rows(const sh::RowPlan& plan, const T* x, int64_t stride, int64_t rows,
                      int64_t len, Acc<T>* out) {
  using M = Acc<T>;
  constexpr int R = kRowLanes;
  const int vec = plan.vec;
  const int64_t round = sh::partition_stride(plan.threads, vec);
  const int live_threads =
      static_cast<int>(std::min<int64_t>(plan.threads, sh::ceil_div(len, vec)));
  const M init = sh::reduce_init<M>(K);
  // tile[j * R + l]: row l's element j (len < a warp's round: at most 32 threads of 4)
  M tile[sh::kWarpSize * 4 * R];
  M v[sh::kWarpSize][R];
  for (int64_t r0 = 0; r0 < rows; r0 += R) {
    const int nr = static_cast<int>(std::min<int64_t>(R, rows - r0));
    for (int l = 0; l < R; ++l) {
      const T* row = x + (r0 + std::min(l, nr - 1)) * stride;  // spare lanes repeat a row
      for (int64_t j = 0; j < len; ++j) tile[j * R + l] = load(row, j);
    }
    for (int t = 0; t < live_threads; ++t)
      for (int l = 0; l < R; ++l) v[t][l] = init;
    // Element j goes to thread (j % round) / vec; ascending j keeps each thread's order.
    for (int64_t b = 0; b < len; b += round) {
      for (int64_t j = b; j < std::min(len, b + round); ++j) {
        M* acc = v[(j - b) / vec];
        const M* e = &tile[j * R];
        for (int l = 0; l < R; ++l) acc[l] = sh::reduce_accumulate(K, acc[l], e[l]);
      }
    }
    // The warp's tree over the live partials. Its combines with an empty lane's init are left
    // out: each is the identity (+0 added to a partial that started at +0 and so is never -0,
    // a product by 1, a max with -inf, a min with +inf).
    int live = live_threads;
    for (int off = sh::kWarpSize / 2; off > 0; off /= 2) {
      for (int t = 0; t + off < live && t < off; ++t)
        for (int l = 0; l < R; ++l) v[t][l] = combine<K>(v[t][l], v[t + off][l]);
      live = std::min(live, off);
    }
    for (int l = 0; l < nr; ++l) out[r0 + l] = v[0][l];
  }
}

// Partials of `rows` rows of `len` (row o at x + o * len): block_reduce each, rows shorter
// than a warp's round kRowLanes at a time; over the OpenMP threads when the work pays for it.
template <ReduceKind K, typename T>
void row_partials(const sh::RowPlan& plan, const T* x, int64_t rows, int64_t len, Acc<T>* out) {
  const bool par = rows * len > kParallelWork;
  // Rows shorter than a round of the warp: side by side (a row alone is a short, branchy walk).
  if (plan.threads == sh::kWarpSize && len < sh::partition_stride(plan.threads, plan.vec)) {
    const int64_t groups = sh::ceil_div(rows, kRowLanes);
#pragma omp parallel for if (par)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t r0 = g * kRowLanes;
      warp_reduce_rows<K>(plan, x + r0 * len, len, std::min<int64_t>(kRowLanes, rows - r0), len,
                          out + r0);
    }
    return;
  }
#pragma omp parallel for if (par)
  for (int64_t o = 0; o < rows; ++o) out[o] = block_reduce<K>(plan, x + o * len, len);
}

// inner == 1: rows, each split into pieces that a block reduces; a warp combines the pieces.
template <ReduceKind K, typename T>
void reduce_rows(const T* x, T* y, int64_t outer, int64_t n, Acc<T>* ws) {
  using M = Acc<T>;
  const sh::SegmentPlan seg = sh::segment_plan(outer, n, 1);
  const sh::RowPlan plan = sh::row_plan(n);
  const bool par = outer * n > kParallelWork;
  // Rows shorter than a warp's round (a sum over small spatial maps, a squeeze-excite's
  // gradient): kRowLanes side by side, as row_partials reduces them.
  if (seg.segments == 1 && plan.threads == sh::kWarpSize &&
      n < sh::partition_stride(plan.threads, plan.vec)) {
    const int64_t groups = sh::ceil_div(outer, kRowLanes);
#pragma omp parallel for if (par)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t r0 = g * kRowLanes;
      const int64_t rows = std::min<int64_t>(kRowLanes, outer - r0);
      M part[kRowLanes];
      warp_reduce_rows<K>(plan, x + r0 * n, n, rows, n, part);
      for (int64_t l = 0; l < rows; ++l) store(y, r0 + l, sh::reduce_finish(K, part[l], n));
    }
    return;
  }
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
  // f32 and bf16 sums (bias gradients): the same additions in the same order, 16 columns a
  // vector (a bf16 value widened to f32 exactly, as load() widens it).
  if constexpr (K == ReduceKind::kSum && std::is_same_v<T, float>) {
    if (column_sums_avx512(x + (o * n + r0) * inner + i0, inner, r1 - r0, i1 - i0, acc)) return;
  }
  if constexpr (K == ReduceKind::kSum && std::is_same_v<T, BFloat16> &&
                std::is_same_v<Acc<T>, float>) {
    static_assert(sizeof(BFloat16) == sizeof(uint16_t));
    const auto* bits = reinterpret_cast<const uint16_t*>(x + (o * n + r0) * inner + i0);
    if (column_sums_bf16_avx512(bits, inner, r1 - r0, i1 - i0, acc)) return;
  }
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
  if (pieces == 1) {  // a partial per row
    row_partials<K>(plan, x, rows, ch.s, ws);
  } else {
#pragma omp parallel for if (rows * ch.s > kParallelWork)
    for (int64_t t = 0; t < rows * pieces; ++t) {
      const int64_t o = t / pieces, start = (t % pieces) * ch.seg.seg_len;
      ws[t] = block_reduce<K>(plan, x + o * ch.s + start, std::min(ch.s - start, ch.seg.seg_len));
    }
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
