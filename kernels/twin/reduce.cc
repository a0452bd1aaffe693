#include "kernels/twin/reduce.h"

#include <string>

#include "kernels/shared/reduce_math.h"
#include "kernels/shared/rowwise_dispatch.h"
#include "kernels/shared/rowwise_tree.h"

namespace ampc::kernels::twin {
namespace {

namespace sh = kernels::shared;
using sh::ReduceKind;

// inner == 1: rows, each split into pieces that a block reduces; a warp combines the pieces.
template <typename T>
void reduce_rows(ReduceKind k, const T* x, T* y, int64_t outer, int64_t n, float* ws) {
  const sh::SegmentPlan seg = sh::segment_plan(outer, n, 1);
  const sh::RowPlan plan = sh::row_plan(n);
  auto combine = [k](float a, float b) { return sh::reduce_combine(k, a, b); };
#pragma omp parallel for if (outer * n > (1 << 16))
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t s = 0; s < seg.segments; ++s) {
      const int64_t start = s * seg.seg_len;
      const int64_t len = n - start < seg.seg_len ? n - start : seg.seg_len;
      const T* row = x + o * n + start;
      const float a = sh::row_reduce_host(
          plan, len, sh::reduce_init(k),
          [&](float acc, int64_t j) { return sh::reduce_accumulate(k, acc, sh::load_f(row, j)); },
          combine);
      if (seg.segments == 1) {
        sh::store_f(y, o, sh::reduce_finish(k, a, n));
      } else {
        ws[o * seg.segments + s] = a;
      }
    }
    if (seg.segments == 1) continue;
    const float* parts = ws + o * seg.segments;
    const float a = sh::row_reduce_host(
        sh::RowPlan{sh::kCombineThreads, 1}, seg.segments, sh::reduce_init(k),
        [&](float acc, int64_t s) { return combine(acc, parts[s]); }, combine);
    sh::store_f(y, o, sh::reduce_finish(k, a, n));
  }
}

// inner > 1: a thread per output column and piece of the rows, walking its rows in order;
// then a thread per output combines the pieces in order.
template <typename T>
void reduce_columns(ReduceKind k, const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                    float* ws) {
  const sh::SegmentPlan seg = sh::segment_plan(outer, n, inner);
#pragma omp parallel for if (outer * n * inner > (1 << 16))
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t s = 0; s < seg.segments; ++s) {
      const int64_t start = s * seg.seg_len;
      const int64_t end = n < start + seg.seg_len ? n : start + seg.seg_len;
      for (int64_t i = 0; i < inner; ++i) {
        float a = sh::reduce_init(k);
        for (int64_t r = start; r < end; ++r)
          a = sh::reduce_accumulate(k, a, sh::load_f(x, (o * n + r) * inner + i));
        if (seg.segments == 1) {
          sh::store_f(y, o * inner + i, sh::reduce_finish(k, a, n));
        } else {
          ws[(o * seg.segments + s) * inner + i] = a;
        }
      }
    }
    if (seg.segments == 1) continue;
    for (int64_t i = 0; i < inner; ++i) {
      float a = sh::reduce_init(k);
      for (int64_t s = 0; s < seg.segments; ++s)
        a = sh::reduce_combine(k, a, ws[(o * seg.segments + s) * inner + i]);
      sh::store_f(y, o * inner + i, sh::reduce_finish(k, a, n));
    }
  }
}

// [N, C, S] over N and S: the rows' partials (as reduce_rows' pieces, never finished), then
// a thread per channel combines them in the order row, piece.
template <typename T>
void reduce_channels(ReduceKind k, const T* x, T* y, const sh::ChannelReduce& ch, float* ws) {
  const sh::RowPlan plan = sh::row_plan(ch.s);
  const int64_t pieces = ch.seg.segments, rows = ch.n * ch.c;
  auto combine = [k](float a, float b) { return sh::reduce_combine(k, a, b); };
#pragma omp parallel for if (rows * ch.s > (1 << 16))
  for (int64_t o = 0; o < rows; ++o) {
    for (int64_t p = 0; p < pieces; ++p) {
      const int64_t start = p * ch.seg.seg_len;
      const int64_t len = ch.s - start < ch.seg.seg_len ? ch.s - start : ch.seg.seg_len;
      const T* row = x + o * ch.s + start;
      ws[o * pieces + p] = sh::row_reduce_host(
          plan, len, sh::reduce_init(k),
          [&](float acc, int64_t j) { return sh::reduce_accumulate(k, acc, sh::load_f(row, j)); },
          combine);
    }
  }
  for (int64_t c = 0; c < ch.c; ++c) {
    float a = sh::reduce_init(k);
    for (int64_t i = 0; i < ch.n; ++i) {
      for (int64_t p = 0; p < pieces; ++p) a = combine(a, ws[(i * ch.c + c) * pieces + p]);
    }
    sh::store_f(y, c, sh::reduce_finish(k, a, ch.n * ch.s));
  }
}

// Several reduced groups: a block per output walks the reduced elements (flat index over the
// reduced axes, last fastest) with the row partition of vector width 1.
template <typename T>
void reduce_general(ReduceKind k, const T* x, T* y, const sh::ReduceShape& s) {
  const sh::StridedReduce g = sh::strided_reduce(s);
  const sh::RowPlan plan{sh::row_plan(g.n).threads, 1};
  auto combine = [k](float a, float b) { return sh::reduce_combine(k, a, b); };
#pragma omp parallel for if (g.outputs * g.n > (1 << 16))
  for (int64_t o = 0; o < g.outputs; ++o) {
    const int64_t base = sh::kept_offset(g, o);
    const float a = sh::row_reduce_host(
        plan, g.n, sh::reduce_init(k),
        [&](float acc, int64_t r) {
          return sh::reduce_accumulate(k, acc, sh::load_f(x, base + sh::reduced_offset(g, r)));
        },
        combine);
    sh::store_f(y, o, sh::reduce_finish(k, a, g.n));
  }
}

}  // namespace

void reduce(ReduceOp op, DType dtype, const void* x, void* y, int rank, const int64_t* dims,
            const bool* reduced, void* workspace) {
  const sh::ReduceShape s = sh::checked_reduce_shape(rank, dims, reduced);
  const auto k = static_cast<ReduceKind>(op);
  sh::dispatch_float_types(dtype, "reduce", [&](auto tag) {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    float* ws = static_cast<float*>(workspace);
    if (const sh::ChannelReduce ch = sh::channel_reduce(s); ch.ok)
      return reduce_channels(k, xt, yt, ch, ws);
    if (s.general) return reduce_general(k, xt, yt, s);
    if (s.outer * s.inner == 0) return;
    if (s.inner == 1) return reduce_rows(k, xt, yt, s.outer, s.n, ws);
    reduce_columns(k, xt, yt, s.outer, s.n, s.inner, ws);
  });
}

}  // namespace ampc::kernels::twin
