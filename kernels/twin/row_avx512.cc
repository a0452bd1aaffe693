// The AVX-512 row steps of row_avx512.h. The build targets plain x86-64, so these functions
// carry target("avx512f") and are called only where the CPU has it (checked once).
//
// The emulated block (rowwise_tree.h): thread t folds the chunks of V elements at t*V + k*T*V,
// k = 0, 1, ..., each element in order into its accumulator acc[t]. Here the accumulators of
// 16 threads (a group: threads 16g .. 16g+15) are the lanes of one vector, so each step
// combines 16 accumulators with one instruction. With V = 1 a group's elements in a round are
// 16 consecutive values, lane l holding thread 16g + l. With V = 4 they are 64 consecutive
// values, thread t's four at 4t .. 4t+3: a 4x4 transpose within each 128-bit block of the four
// loaded vectors (the in-lane shuffles, cheaper than permutes across the vector) gives four
// vectors of element 0, 1, 2, 3 of every thread, combined into the accumulators in that
// order; its lane 4j + i holds thread 16g + 4i + j. Threads past the end of a partial last
// round keep their accumulator (masked operations), as threads without elements do in the
// kernel. The tree then runs on the lanes: each warp's shuffle-down steps as vector steps
// (offsets 16 .. 1, each pairing the lanes of thread l and l + offset, whatever the layout),
// the warps' results through rowwise_tree.h's warp_tree_host. Every accumulator sees the
// scalar combine's operations on the same values in the same order (max keeps the
// accumulator unless the new value is greater; a sum adds the new value to the accumulator),
// so the bits are the generic code's. (Where two NaNs of different payloads meet in an add,
// which payload the sum keeps is the compiler's choice of operand order, here as in the
// generic loops; tests/unit/row_fold_test.cc accepts either there.)
#include "kernels/twin/row_avx512.h"

// GCC 12's AVX-512 intrinsics give -Wmaybe-uninitialized for their own undefined
// pass-through value where inlined (GCC bug 105593). The warning points into the header, so
// the pragma around its inclusion silences exactly these.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "base/cpu_features.h"
#include "kernels/shared/float_math.h"
#include "kernels/twin/row_host.h"

// Helpers are inlined into the target("avx512f") entry points (a base-target function can
// use neither the intrinsics nor the zmm registers).
#define AMPC_AVX512 [[gnu::target("avx512f")]]
#define AMPC_AVX512_INLINE [[gnu::target("avx512f"), gnu::always_inline]] inline
// The column sums' 16-bit loads need AVX512BW and AVX512VL besides (every AVX-512 CPU since
// Skylake-X has them).
#define AMPC_AVX512BW [[gnu::target("avx512f,avx512bw,avx512vl")]]
#define AMPC_AVX512BW_INLINE [[gnu::target("avx512f,avx512bw,avx512vl"), gnu::always_inline]] inline

namespace ampc::kernels::twin {
namespace {

constexpr int kLanes = 16;
constexpr int kMaxGroups = 1024 / kLanes;  // rowwise_tree.h allows up to 1024 threads
constexpr __mmask16 kAll = 0xffff;

bool has_avx512() {
  return cpu_has_avx512f();
}

// The 16-bit masked loads of the bf16 column sums are AVX512BW (with VL for 256 bits).
bool has_avx512_bw() {
  return cpu_has_avx512_bw_vl();
}

// The scalar combine of each kind, MaxOf (b > a ? b : a) or SumOf (a + b), in the lanes of
// `live`; the other lanes keep acc. vmaxps(x, acc) returns x when x > acc, else acc (both ±0,
// or a NaN on either side: acc), as MaxOf(acc, x) does.
template <RowFold K>
AMPC_AVX512_INLINE __m512 combine(__m512 acc, __mmask16 live, __m512 x) {
  if constexpr (K == RowFold::kMax) {
    return _mm512_mask_max_ps(acc, live, x, acc);
  } else {
    return _mm512_mask_add_ps(acc, live, acc, x);
  }
}
// All lanes.
template <RowFold K>
AMPC_AVX512_INLINE __m512 combine(__m512 acc, __m512 x) {
  if constexpr (K == RowFold::kMax) {
    return _mm512_max_ps(x, acc);
  } else {
    return _mm512_add_ps(acc, x);
  }
}

// The first `lanes` lanes set (none for lanes <= 0, all from 16 on).
inline __mmask16 first_lanes(int64_t lanes) {
  if (lanes <= 0) return 0;
  return lanes >= kLanes ? kAll : __mmask16((1u << lanes) - 1);
}

// Group of 16 threads, V = 1: their elements of one round, p[0 .. 16), the first `threads` of
// them present.
template <RowFold K>
AMPC_AVX512_INLINE __m512 fold_chunk1(__m512 acc, const float* p, int64_t threads) {
  if (threads >= kLanes) return combine<K>(acc, _mm512_loadu_ps(p));
  const __mmask16 live = first_lanes(threads);
  return combine<K>(acc, live, _mm512_maskz_loadu_ps(live, p));
}

// Group of 16 threads, V = 4: p[0 .. 64) with thread t's chunk at 4t; the first `threads`
// threads have their chunk. z[i] holds threads 4i .. 4i+3, thread 4i + j in block j; the
// transpose of each block's 4x4 (z[0..3] block j) puts element k of thread 4i + j in lane
// 4j + i of e[k].
template <RowFold K>
AMPC_AVX512_INLINE __m512 fold_chunk4(__m512 acc, const float* p, int64_t threads) {
  __m512 z[4];
  if (threads >= kLanes) {
    for (int i = 0; i < 4; ++i) z[i] = _mm512_loadu_ps(p + kLanes * i);
  } else {  // 4 * threads values present: a masked load reads nothing past them
    for (int i = 0; i < 4; ++i) {
      z[i] = _mm512_maskz_loadu_ps(first_lanes(4 * threads - kLanes * i), p + kLanes * i);
    }
  }
  const __m512 lo01 = _mm512_unpacklo_ps(z[0], z[1]), lo23 = _mm512_unpacklo_ps(z[2], z[3]);
  const __m512 hi01 = _mm512_unpackhi_ps(z[0], z[1]), hi23 = _mm512_unpackhi_ps(z[2], z[3]);
  const __m512 e0 = _mm512_shuffle_ps(lo01, lo23, 0x44), e1 = _mm512_shuffle_ps(lo01, lo23, 0xEE);
  const __m512 e2 = _mm512_shuffle_ps(hi01, hi23, 0x44), e3 = _mm512_shuffle_ps(hi01, hi23, 0xEE);
  if (threads >= kLanes) {
    return combine<K>(combine<K>(combine<K>(combine<K>(acc, e0), e1), e2), e3);
  }
  const __m512i thread_of_lane =
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __mmask16 live =
      _mm512_cmplt_epi32_mask(thread_of_lane, _mm512_set1_epi32(static_cast<int>(threads)));
  return combine<K>(combine<K>(combine<K>(combine<K>(acc, live, e0), live, e1), live, e2), live,
                    e3);
}

template <RowFold K, int V>
AMPC_AVX512_INLINE __m512 fold_chunk(__m512 acc, const float* p, int64_t threads) {
  if constexpr (V == 4) {
    return fold_chunk4<K>(acc, p, threads);
  } else {
    return fold_chunk1<K>(acc, p, threads);
  }
}

// Lane moves of the tree: lane l receives lane l + 8 (blocks 2, 3 to 0, 1), l + 4 (block 1
// to 0), l + 2 (lanes 2, 3 to 0, 1 of each block), l + 1.
AMPC_AVX512_INLINE __m512 down8(__m512 v) {
  return _mm512_shuffle_f32x4(v, v, 0xEE);
}
AMPC_AVX512_INLINE __m512 down4(__m512 v) {
  return _mm512_shuffle_f32x4(v, v, 0x55);
}
AMPC_AVX512_INLINE __m512 down2(__m512 v) {
  return _mm512_permute_ps(v, 0xEE);
}
AMPC_AVX512_INLINE __m512 down1(__m512 v) {
  return _mm512_permute_ps(v, 0x55);
}

// One warp's shuffle-down tree on its 32 partials (lo: threads 0-15, hi: 16-31, each in the
// layout of V): thread l combines thread l + offset into itself, offsets 16, 8, 4, 2, 1; the
// result is thread 0's, in lane 0. With V = 1 thread l + offset is lane l + offset; with V = 4
// (thread 4i + j in lane 4j + i) offsets 8 and 4 step i (lanes + 2, + 1), offsets 2 and 1
// step j (lanes + 8, + 4).
template <RowFold K, int V>
AMPC_AVX512_INLINE float warp_tree(__m512 lo, __m512 hi) {
  __m512 v = combine<K>(lo, hi);
  if constexpr (V == 4) {
    v = combine<K>(v, down2(v));
    v = combine<K>(v, down1(v));
    v = combine<K>(v, down8(v));
    v = combine<K>(v, down4(v));
  } else {
    v = combine<K>(v, down8(v));
    v = combine<K>(v, down4(v));
    v = combine<K>(v, down2(v));
    v = combine<K>(v, down1(v));
  }
  return _mm512_cvtss_f32(v);
}

// The fold of a row by `threads` threads. kGroups: the number of groups when known at compile
// time (a warp: 2, whose accumulators then stay in registers), else 0 and threads / 16.
template <RowFold K, int V, int kGroups>
AMPC_AVX512_INLINE float fold(int threads, const float* v, int64_t n, float init) {
  const int groups = kGroups ? kGroups : threads / kLanes;
  __m512 acc[kGroups ? kGroups : kMaxGroups];
  for (int g = 0; g < groups; ++g) acc[g] = _mm512_set1_ps(init);
  const int64_t round = int64_t{threads} * V, group_width = kLanes * V;
  int64_t b = 0;
  for (; b + round <= n; b += round) {
    for (int g = 0; g < groups; ++g) {
      acc[g] = fold_chunk<K, V>(acc[g], v + b + g * group_width, kLanes);
    }
  }
  // The partial last round: n - b values, so (n - b) / V threads with a chunk (n % 4 == 0
  // where V = 4), the rest keep their accumulators.
  for (int g = 0; b < n && g < groups; ++g) {
    const int64_t threads_left = (n - b) / V - int64_t{g} * kLanes;
    if (threads_left <= 0) break;
    acc[g] = fold_chunk<K, V>(acc[g], v + b + g * group_width, threads_left);
  }
  // tree_host's second stage: the warps' results combined as one warp.
  const int warps = groups / 2;
  float warp[kGroups ? kGroups / 2 : kMaxGroups / 2];
  for (int w = 0; w < warps; ++w) warp[w] = warp_tree<K, V>(acc[2 * w], acc[2 * w + 1]);
  if constexpr (K == RowFold::kMax) {
    shared::warp_tree_host(warp, warps, MaxOf());
  } else {
    shared::warp_tree_host(warp, warps, SumOf());
  }
  return warp[0];
}

template <RowFold K, int V>
AMPC_AVX512_INLINE float fold_threads(int threads, const float* v, int64_t n, float init) {
  constexpr int kWarpGroups = shared::kWarpSize / kLanes;
  return threads == shared::kWarpSize ? fold<K, V, kWarpGroups>(threads, v, n, init)
                                      : fold<K, V, 0>(threads, v, n, init);
}

template <RowFold K>
AMPC_AVX512_INLINE float fold_plan(shared::RowPlan plan, const float* v, int64_t n, float init) {
  return plan.vec == 4 ? fold_threads<K, 4>(plan.threads, v, n, init)
                       : fold_threads<K, 1>(plan.threads, v, n, init);
}

// The plans fold handles: whole warps, chunks of 4 (whole chunks only) or 1.
bool handled(shared::RowPlan plan, int64_t n) {
  return plan.threads % shared::kWarpSize == 0 && plan.threads > 0 && plan.threads <= 1024 &&
         ((plan.vec == 4 && n % 4 == 0) || plan.vec == 1);
}

// e[j] = exp_f32(x[j] - m), vectorised by the compiler (exp_f32 is branch-free). The last
// n % 16 values go through a zero-padded vector too: GCC would finish the loop with scalar
// exps, a cost comparable to the whole vector loop on a short row.
AMPC_AVX512_INLINE void exp_shifted(const float* x, int64_t n, float m, float* e) {
  const int64_t whole = n - n % kLanes;
  for (int64_t j = 0; j < whole; ++j) e[j] = fmath::exp_f32(shared::sub(x[j], m));
  if (whole == n) return;
  const __mmask16 tail = first_lanes(n - whole);
  alignas(64) float t[kLanes];
  _mm512_store_ps(t, _mm512_maskz_loadu_ps(tail, x + whole));
  for (int l = 0; l < kLanes; ++l) t[l] = fmath::exp_f32(shared::sub(t[l], m));
  _mm512_mask_storeu_ps(e + whole, tail, _mm512_load_ps(t));
}

// One row's statistics (row_softmax_stats).
AMPC_AVX512_INLINE void stats(const float* x, int64_t n, float* e, float* max, float* sum) {
  const shared::RowPlan plan = shared::row_plan(n);
  *max = fold_plan<RowFold::kMax>(plan, x, n, -INFINITY);
  exp_shifted(x, n, *max, e);
  *sum = fold_plan<RowFold::kSum>(plan, e, n, 0.0f);
}

// Softmax of R consecutive rows, each step for all R before the next: the rows' chains (fold,
// tree, exp, fold, tree, division or log) are independent, so the CPU overlaps one row's
// latencies (the trees, the log) with the others' work. e: R * n floats.
template <int R>
AMPC_AVX512_INLINE void softmax_block(const float* x, float* y, int64_t n, bool log_softmax,
                                      float* e) {
  const shared::RowPlan plan = shared::row_plan(n);
  float m[R], s[R];
  for (int r = 0; r < R; ++r) m[r] = fold_plan<RowFold::kMax>(plan, x + r * n, n, -INFINITY);
  for (int r = 0; r < R; ++r) exp_shifted(x + r * n, n, m[r], e + r * n);
  for (int r = 0; r < R; ++r) s[r] = fold_plan<RowFold::kSum>(plan, e + r * n, n, 0.0f);
  for (int r = 0; r < R; ++r) {
    const float *xr = x + r * n, *er = e + r * n;
    float* yr = y + r * n;
    if (log_softmax) {
      const float log_s = log_of(s[r]);
      for (int64_t j = 0; j < n; ++j) yr[j] = shared::sub(shared::sub(xr[j], m[r]), log_s);
    } else {
      const float inv = shared::div(1.0f, s[r]);
      for (int64_t j = 0; j < n; ++j) yr[j] = shared::mul(er[j], inv);
    }
  }
}

// Rows side by side in softmax_rows_avx512: 4 where a warp reduces the row (n < 1024, whose
// latencies are not hidden behind the row's own work), else 1.
int block_rows(int64_t n) {
  return n < 1024 ? 4 : 1;
}

}  // namespace

int64_t softmax_rows_scratch(int64_t n) {
  return block_rows(n) * n;
}

AMPC_AVX512 bool fold_row_avx512(shared::RowPlan plan, const float* v, int64_t n, float init,
                                 RowFold kind, float* out) {
  if (!has_avx512() || !handled(plan, n)) return false;
  *out = kind == RowFold::kMax ? fold_plan<RowFold::kMax>(plan, v, n, init)
                               : fold_plan<RowFold::kSum>(plan, v, n, init);
  return true;
}

AMPC_AVX512 bool softmax_stats_avx512(const float* x, int64_t n, float* e, float* max, float* sum) {
  if (!has_avx512()) return false;
  stats(x, n, e, max, sum);
  return true;
}

AMPC_AVX512 bool softmax_rows_avx512(const float* x, float* y, int64_t rows, int64_t n,
                                     bool log_softmax, float* e) {
  if (!has_avx512()) return false;
  int64_t r = 0;
  if (block_rows(n) == 4) {
    for (; r + 4 <= rows; r += 4) softmax_block<4>(x + r * n, y + r * n, n, log_softmax, e);
  }
  for (; r < rows; ++r) softmax_block<1>(x + r * n, y + r * n, n, log_softmax, e);
  return true;
}

namespace {

// 16 values (all of `live`'s lanes; the others 0) as f32.
AMPC_AVX512BW_INLINE __m512 load_f32(const float* p, __mmask16 live) {
  return _mm512_maskz_loadu_ps(live, p);
}
// bf16 bits widened exactly: the f32 with those 16 high bits.
AMPC_AVX512BW_INLINE __m512 load_f32(const uint16_t* p, __mmask16 live) {
  const __m256i bits = _mm256_maskz_loadu_epi16(live, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// acc[0 .. 16 * V) += every row's next 16 * V values: V accumulator vectors in registers (the
// last vector only in the lanes of `last`).
template <int V, typename T>
AMPC_AVX512BW_INLINE void column_block(const T* x, int64_t stride, int64_t rows, float* acc,
                                       __mmask16 last = kAll) {
  __m512 a[V];
  for (int v = 0; v < V; ++v)
    a[v] = _mm512_maskz_loadu_ps(v + 1 < V ? kAll : last, acc + kLanes * v);
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * stride;
    for (int v = 0; v < V; ++v)
      a[v] = _mm512_add_ps(a[v], load_f32(row + kLanes * v, v + 1 < V ? kAll : last));
  }
  for (int v = 0; v < V; ++v)
    _mm512_mask_storeu_ps(acc + kLanes * v, v + 1 < V ? kAll : last, a[v]);
}

template <typename T>
AMPC_AVX512BW_INLINE void column_sums(const T* x, int64_t stride, int64_t rows, int64_t cols,
                                      float* acc) {
  int64_t j = 0;
  for (; j + 16 * kLanes <= cols; j += 16 * kLanes) column_block<16>(x + j, stride, rows, acc + j);
  for (; j + 4 * kLanes <= cols; j += 4 * kLanes) column_block<4>(x + j, stride, rows, acc + j);
  for (; j + kLanes <= cols; j += kLanes) column_block<1>(x + j, stride, rows, acc + j);
  // The last columns (fewer than 16): one masked vector.
  if (j < cols)
    column_block<1>(x + j, stride, rows, acc + j, static_cast<__mmask16>((1u << (cols - j)) - 1));
}

}  // namespace

AMPC_AVX512BW bool column_sums_avx512(const float* x, int64_t stride, int64_t rows, int64_t cols,
                                      float* acc) {
  if (!has_avx512_bw()) return false;
  column_sums(x, stride, rows, cols, acc);
  return true;
}

AMPC_AVX512BW bool column_sums_bf16_avx512(const uint16_t* x, int64_t stride, int64_t rows,
                                           int64_t cols, float* acc) {
  if (!has_avx512_bw()) return false;
  column_sums(x, stride, rows, cols, acc);
  return true;
}

}  // namespace ampc::kernels::twin
