// Reductions (ReduceSum, Mean, Prod, Max, Min, L1, L2, LogSum, SumSquare) shared by the CUDA
// kernels (kernels/cuda/reduce.cu) and their twin (kernels/twin/reduce.cc), which is also the
// CPU backend's implementation of these ops: what one element does to an accumulator, how two
// partial accumulators combine, the final step, and how the work is split (a plan that depends
// only on the shape, so that the twin reproduces the device's partition and order).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "base/error.h"
#include "kernels/shared/hd.h"
#include "kernels/shared/kernel_args.h"
#include "kernels/shared/rowwise_fp.h"
#include "kernels/shared/rowwise_tree.h"

namespace ampc::kernels::shared {

// The launch API's ReduceOp (kernel_args.h), under the name the math uses.
using ReduceKind = ReduceOp;

// The accumulator type M is float for f32 and the 16-bit types (the CUDA kernels), double for
// f64 (the CPU backend's f64 reductions, run by the twin); the float path's operations do not
// depend on the template.
template <typename M = float>
AMPC_HD M reduce_init(ReduceKind k) {
  switch (k) {
    case ReduceKind::kProd:
      return M(1);
    case ReduceKind::kMax:
      return -static_cast<M>(__builtin_huge_val());
    case ReduceKind::kMin:
      return static_cast<M>(__builtin_huge_val());
    default:
      return M(0);
  }
}

// Max / Min propagate NaN (the first NaN met stays), as the CPU op.
template <typename M>
AMPC_HD M reduce_combine(ReduceKind k, M a, M b) {
  switch (k) {
    case ReduceKind::kProd:
      return mul(a, b);
    case ReduceKind::kMax:
      return (b > a || is_nan(b)) && !is_nan(a) ? b : a;
    case ReduceKind::kMin:
      return (b < a || is_nan(b)) && !is_nan(a) ? b : a;
    default:
      return add(a, b);
  }
}

// One element x into the accumulator.
template <typename M>
AMPC_HD M reduce_accumulate(ReduceKind k, M a, M x) {
  switch (k) {
    case ReduceKind::kL1:
      return add(a, x < M(0) ? -x : x);
    case ReduceKind::kL2:
    case ReduceKind::kSumSquare:
      return add(a, mul(x, x));
    default:
      return reduce_combine(k, a, x);
  }
}

// fp64 log of the f64 ReduceLogSum: the host's libm (the CUDA reduce kernels take no f64, so
// the device branch only keeps nvcc's host-device checks quiet).
AMPC_HD double log_f64(double a) {
#if defined(__CUDA_ARCH__)
  return ::log(a);
#else
  return std::log(a);
#endif
}

// n: the number of reduced elements.
template <typename M>
AMPC_HD M reduce_finish(ReduceKind k, M a, int64_t n) {
  switch (k) {
    case ReduceKind::kMean:
      return div(a, static_cast<M>(n));
    case ReduceKind::kL2:
      return sqrt_rn(a);
    case ReduceKind::kLogSum:
      if constexpr (std::is_same_v<M, double>) {
        return log_f64(a);
      } else {
        return log_f(a);
      }
    default:
      return a;
  }
}

// The input viewed as [outer, n, inner] when the reduced axes are one contiguous group (after
// dropping size-1 axes and merging neighbours of the same kind, as the CPU op does); otherwise
// `general` with the merged dims.
struct ReduceShape {
  bool general;
  int64_t outer, n, inner;
  int rank;  // merged
  int64_t dims[8];
  bool reduced[8];
};
AMPC_HD ReduceShape reduce_shape(int rank, const int64_t* dims, const bool* reduced) {
  ReduceShape s{};
  s.rank = 0;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] == 1) continue;
    if (s.rank > 0 && s.reduced[s.rank - 1] == reduced[i]) {
      s.dims[s.rank - 1] *= dims[i];
    } else {
      s.dims[s.rank] = dims[i];
      s.reduced[s.rank] = reduced[i];
      ++s.rank;
    }
  }
  int groups = 0;
  for (int i = 0; i < s.rank; ++i) groups += s.reduced[i];
  s.general = groups > 1;
  s.outer = s.n = s.inner = 1;
  bool seen = false;
  for (int i = 0; i < s.rank && !s.general; ++i) {
    if (s.reduced[i]) {
      s.n = s.dims[i];
      seen = true;
    } else {
      (seen ? s.inner : s.outer) *= s.dims[i];
    }
  }
  return s;
}

// The general case (several reduced groups): outputs over the kept axes and the reduced
// elements of each, both as flat indices (last axis fastest) turned into element offsets.
struct StridedReduce {
  int64_t outputs, n;
  int kept_rank, red_rank;
  int64_t kept_dims[8], kept_strides[8], red_dims[8], red_strides[8];
};
AMPC_HD StridedReduce strided_reduce(const ReduceShape& s) {
  StridedReduce g{};
  g.outputs = g.n = 1;
  int64_t stride = 1;
  for (int i = s.rank - 1; i >= 0; --i) {
    if (s.reduced[i]) {
      g.red_dims[g.red_rank] = s.dims[i];
      g.red_strides[g.red_rank++] = stride;
      g.n *= s.dims[i];
    } else {
      g.kept_dims[g.kept_rank] = s.dims[i];
      g.kept_strides[g.kept_rank++] = stride;
      g.outputs *= s.dims[i];
    }
    stride *= s.dims[i];
  }
  return g;  // dims listed innermost first
}
AMPC_HD int64_t flat_to_offset(int64_t flat, int rank, const int64_t* dims,
                               const int64_t* strides) {
  int64_t off = 0;
  for (int i = 0; i < rank; ++i) {
    off += (flat % dims[i]) * strides[i];
    flat /= dims[i];
  }
  return off;
}
AMPC_HD int64_t kept_offset(const StridedReduce& g, int64_t o) {
  return flat_to_offset(o, g.kept_rank, g.kept_dims, g.kept_strides);
}
AMPC_HD int64_t reduced_offset(const StridedReduce& g, int64_t r) {
  return flat_to_offset(r, g.red_rank, g.red_dims, g.red_strides);
}

// Split of the reduced axis into `segments` pieces of `seg_len` elements when there are too few
// outputs to fill an H100/H200 (132 SMs): each piece's partial accumulator goes to the
// workspace, then a second kernel combines the pieces in order (fixed by the shape alone).
constexpr int64_t kTargetBlocks = 264;  // row reductions: two blocks per SM
constexpr int64_t kTargetColumnThreads = 1 << 16;
constexpr int64_t kMinRowSegment = 16384;  // elements per block at least
constexpr int64_t kMinColumnSegment = 64;  // rows per column thread at least
constexpr int64_t kMaxSegments = 1024;
constexpr int kColumnThreads = 256;  // threads per block of the column kernel
constexpr int kCombineThreads = 32;  // a warp combines a row's segments

struct SegmentPlan {
  int64_t segments, seg_len;
};
// inner == 1: rows of n; inner > 1: columns (n rows of `inner` contiguous outputs).
AMPC_HD SegmentPlan segment_plan(int64_t outer, int64_t n, int64_t inner) {
  int64_t want, most;
  if (inner == 1) {
    want = ceil_div(kTargetBlocks, outer);
    most = ceil_div(n, kMinRowSegment);
  } else {
    want = ceil_div(kTargetColumnThreads, outer * inner);
    most = ceil_div(n, kMinColumnSegment);
  }
  int64_t s = want < most ? want : most;
  s = s < 1 ? 1 : (s > kMaxSegments ? kMaxSegments : s);
  int64_t len = ceil_div(n, s);
  if (inner == 1) len = ceil_div(len, 4) * 4;  // pieces keep the rows' 4-element alignment
  if (len < 1) len = 1;
  return {ceil_div(n, len) > 0 ? ceil_div(n, len) : 1, len};
}

// Per-channel reductions: [N, C, S] over N and S (after merging; the conv bias gradient,
// BatchNorm's gradient sums over N, H, W). Rather than reduce_general's one block per channel
// (C blocks of N * S elements walked with a stride), rows x columns: the N * C rows of S
// contiguous elements reduce as the row kernel reduces them (segment_plan's pieces, the row
// partition), every piece's partial accumulator to the workspace ([N, C, pieces]); then a
// thread per channel combines its N * pieces partials in that order and finishes.
struct ChannelReduce {
  bool ok;  // the shape is [N, C, S] reduced over N and S, none of them empty
  int64_t n, c, s;
  SegmentPlan seg;  // of the rows: segment_plan(n * c, s, 1)
};
AMPC_HD ChannelReduce channel_reduce(const ReduceShape& r) {
  ChannelReduce ch{};
  ch.ok = r.general && r.rank == 3 && r.reduced[0] && !r.reduced[1] && r.reduced[2] &&
          r.dims[0] > 0 && r.dims[1] > 0 && r.dims[2] > 0;
  if (!ch.ok) return ch;
  ch.n = r.dims[0];
  ch.c = r.dims[1];
  ch.s = r.dims[2];
  ch.seg = segment_plan(ch.n * ch.c, ch.s, 1);
  return ch;
}
// Workspace floats of a channel reduction: a partial per row and piece.
AMPC_HD int64_t channel_partials(const ChannelReduce& ch) {
  return ch.n * ch.c * ch.seg.segments;
}

// ---- Host: the launch API's shape check, for the kernels and the twin ----

inline ReduceShape checked_reduce_shape(int rank, const int64_t* dims, const bool* reduced) {
  if (rank < 0 || rank > 8) {
    throw Error("reduce: rank " + std::to_string(rank) + " is not supported (at most 8)");
  }
  return reduce_shape(rank, dims, reduced);
}

}  // namespace ampc::kernels::shared
