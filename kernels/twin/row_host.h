// The host side of the row kernels (softmax, layernorm, cross-entropy): the kernels' row
// reductions and per-element math (kernels/shared) evaluated over whole rows, so that the loops
// vectorise, in the same order and with the same roundings as the CUDA kernels. These twins
// are the CPU backend's implementation of those ops too (runtime/cpu/ops), so the bits the
// CPU op gives are the bits the GPU kernel gives.
#pragma once

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/shared/rowwise.h"
#include "kernels/shared/rowwise_tree.h"
#include "kernels/twin/row_avx512.h"

// A function whose f32 loops run on 512-bit vectors: a target of its own (the twins are built
// for any x86-64), called where the CPU has AVX-512 (cpu_has_avx512_bw_vl). The generic row code
// it calls is always inlined into it, so that its loops take that target; the same operations
// in the same order, so the same bits (row_loops.h).
// (GCC takes the vector width in the target; clang has an attribute of its own for it.)
#if defined(__clang__)
#define AMPC_AVX512_LOOPS \
  [[gnu::target("avx512f,avx512bw,avx512vl"), clang::min_vector_width(512), gnu::noinline]]
#else
#define AMPC_AVX512_LOOPS \
  [[gnu::target("avx512f,avx512bw,avx512vl,prefer-vector-width=512"), gnu::noinline]]
#endif

namespace ampc::kernels::twin {

namespace sh = kernels::shared;

// body(begin, end) over [0, count): split across the OpenMP threads when `parallel`, else run
// here without entering a parallel region (which costs microseconds even with one thread, a
// cost that dominates small rows).
template <typename Body>
void for_rows(int64_t count, bool parallel, Body body) {
  if (!parallel) return body(int64_t{0}, count);
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    body(count * t / threads, count * (t + 1) / threads);
  }
}

// The compute type of a storage type: float for f32 / f16 / bf16, double for f64 (the CPU
// op's fp64, which has no device counterpart).
template <typename T>
using MathOf = typename sh::Elem<T>::Math;

// out[j] = exp_f32(x[j]) (kernels/shared/float_math.h), bit for bit, on the CPU's vector units
// where it has AVX-512 or AVX2. out may alias x.
void exp_array(const float* x, int64_t n, float* out);
// The same on one code path (tests compare each with exp_f32); false where the CPU lacks it.
enum class ExpPath { kBest, kAvx512, kAvx2, kScalar };
bool exp_array_on(ExpPath path, const float* x, int64_t n, float* out);
// f64: libm's exp.
inline void exp_array(const double* x, int64_t n, double* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = std::exp(x[j]);
}
inline float log_of(float v) {
  return sh::log_f(v);
}
inline double log_of(double v) {
  return std::log(v);
}

// The kernels' combines for any compute type (sh::MaxCombine and sh::SumCombine for float).
struct MaxOf {
  template <typename M>
  M operator()(M a, M b) const {
    return b > a ? b : a;
  }
};
struct SumOf {
  template <typename M>
  M operator()(M a, M b) const {
    return sh::add(a, b);
  }
};

// fold_row's generic form: in a full round of T*V elements thread t's V elements are
// consecutive; the T accumulators are independent chains, which the CPU runs side by side.
template <typename M, typename Combine>
M fold_row_generic(sh::RowPlan plan, const M* v, int64_t n, M init, Combine combine) {
  M acc[1024];
  const int threads = plan.threads, vec = plan.vec;
  for (int t = 0; t < threads; ++t) acc[t] = init;
  const int64_t round = sh::partition_stride(threads, vec);
  int64_t b = 0;
  if (vec == 4) {
    for (; b + round <= n; b += round) {
      const M* p = v + b;
      for (int t = 0; t < threads; ++t, p += 4) {
        acc[t] = combine(combine(combine(combine(acc[t], p[0]), p[1]), p[2]), p[3]);
      }
    }
  } else {
    for (; b + round <= n; b += round) {
      for (int t = 0; t < threads; ++t) acc[t] = combine(acc[t], v[b + t]);
    }
  }
  for (int t = 0; b < n; ++t) {  // the last, partial round: threads with elements left
    const int64_t first = b + sh::partition_first(t, vec);
    if (first >= n) break;
    for (int64_t j = first; j < first + vec && j < n; ++j) acc[t] = combine(acc[t], v[j]);
  }
  return sh::tree_host(acc, threads, combine);
}

// row_reduce_host (rowwise_tree.h) over values already computed: thread t of the plan folds
// v[t*V ..] stepping T*V, then the block's tree. The f32 max and sum, the row kernels'
// reductions, run on AVX-512 where the CPU has it (row_avx512.h, the same bits).
template <typename M, typename Combine>
M fold_row(sh::RowPlan plan, const M* v, int64_t n, M init, Combine combine) {
  if constexpr (std::is_same_v<M, float> &&
                (std::is_same_v<Combine, MaxOf> || std::is_same_v<Combine, SumOf>)) {
    const RowFold kind = std::is_same_v<Combine, MaxOf> ? RowFold::kMax : RowFold::kSum;
    float out;
    if (fold_row_avx512(plan, v, n, init, kind, &out)) return out;
  }
  return fold_row_generic(plan, v, n, init, combine);
}

// Elements of a storage type in its compute type: the row itself when they are the same type,
// else `buf` filled with the exact conversions.
template <typename T, typename M = MathOf<T>>
const M* load_row(const T* x, int64_t n, std::vector<M>& buf) {
  if constexpr (std::is_same_v<T, M>) {
    return x;
  } else {
    buf.resize(n);
    for (int64_t j = 0; j < n; ++j) buf[j] = sh::Elem<T>::load(x[j]);
    return buf.data();
  }
}

// Softmax statistics of one contiguous row as a block of the kernel computes them: the maximum
// and the sum of exp(x - max). e (n values) receives exp(x - max).
template <typename M>
void row_softmax_stats(const M* v, int64_t n, M* e, M* max, M* sum) {
  if constexpr (std::is_same_v<M, float>) {
    if (softmax_stats_avx512(v, n, e, max, sum)) return;
  }
  const sh::RowPlan plan = sh::row_plan(n);
  const M m = fold_row(plan, v, n, M(-INFINITY), MaxOf());
  for (int64_t j = 0; j < n; ++j) e[j] = sh::sub(v[j], m);
  exp_array(e, n, e);
  *max = m;
  *sum = fold_row(plan, e, n, M(0), SumOf());
}

// The same for n rows of `inner` columns, each column a softmax row walked in order by one
// thread of the kernel: max[i], sum[i] for i < inner. e: `inner` values of scratch.
template <typename T, typename M = MathOf<T>>
void column_softmax_stats(const T* x, int64_t n, int64_t inner, M* max, M* sum, std::vector<M>& buf,
                          M* e) {
  for (int64_t i = 0; i < inner; ++i) {
    max[i] = M(-INFINITY);
    sum[i] = M(0);
  }
  for (int64_t r = 0; r < n; ++r) {
    const M* v = load_row(x + r * inner, inner, buf);
    for (int64_t i = 0; i < inner; ++i) max[i] = MaxOf()(max[i], v[i]);
  }
  for (int64_t r = 0; r < n; ++r) {
    const M* v = load_row(x + r * inner, inner, buf);
    for (int64_t i = 0; i < inner; ++i) e[i] = sh::sub(v[i], max[i]);
    exp_array(e, inner, e);
    for (int64_t i = 0; i < inner; ++i) sum[i] = sh::add(sum[i], e[i]);
  }
}

}  // namespace ampc::kernels::twin
