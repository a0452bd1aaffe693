// Math of BatchNormalization's kernels (kernels/cuda/batchnorm.cu) and their CPU twin
// (kernels/twin/batchnorm.cc), compiled by nvcc and g++, following the CPU op
// (runtime/cpu/ops/nn_norm.cc, kernels/cpu/norm.cc): two-pass batch statistics (mean, then the
// mean of squared deviations: the biased variance), a = scale / sqrt(var + eps),
// b = bias - mean * a, y = a * x + b, running = running * momentum + batch * (1 - momentum).
// Every operation rounds once (no contraction into FMA on the device), so twin and device agree
// bit for bit; only the summation order differs from the CPU op, and it is fixed here:
// channel ch's count = n * spatial values (element e is x[e / spatial, ch, e % spatial]) are cut
// into `splits` contiguous chunks; a block of kThreads threads sums one chunk (thread t takes
// elements t, t + kThreads, ... of it in order, then a tree: v[t] += v[t + s] for s = kThreads/2
// down to 1); the chunks' sums are added in chunk order starting from 0.
#pragma once

#include <cstdint>

#include "kernels/shared/elementwise_int.h"
#include "kernels/shared/hd.h"
#include "kernels/shared/rowwise_fp.h"

namespace ampc::kernels::shared::bn {

constexpr int kThreads = 256;
// Blocks the statistics kernels aim at in all (a few per SM of an H200) and the fewest values
// a thread should sum; a fixed function of the shape, never of the device, so that the twin
// knows the order.
constexpr int64_t kTargetBlocks = 1024;
constexpr int64_t kMinPerThread = 16;

AMPC_HD int64_t stat_splits(int64_t n, int64_t c, int64_t spatial) {
  const int64_t count = n * spatial;
  if (c <= 0 || count <= 0) return 1;
  const int64_t by_blocks = (kTargetBlocks + c - 1) / c;
  const int64_t by_size = (count + kThreads * kMinPerThread - 1) / (kThreads * kMinPerThread);
  const int64_t s = by_blocks < by_size ? by_blocks : by_size;
  return s < 1 ? 1 : s;
}

// Chunk s of a channel's count values: [*begin, *end).
AMPC_HD void chunk_range(int64_t count, int64_t splits, int64_t s, int64_t* begin, int64_t* end) {
  const int64_t chunk = (count + splits - 1) / splits;
  const int64_t b = s * chunk;
  *begin = b < count ? b : count;
  *end = b + chunk < count ? b + chunk : count;
}

// Arithmetic in the compute type M (float or double) is rowwise_fp.h's add / sub / mul / div /
// sqrt_rn: correctly rounded and never contracted.

// Any storage type <-> the compute type M, as the CPU op's widening does (exact loads, one
// rounding at the store; see elementwise_int.h's Cast).
template <typename M, typename T>
AMPC_HD M b_load(const T* p, int64_t i) {
  return ew::cast_value<M>(p[i]);
}
template <typename T, typename M>
AMPC_HD void b_store(T* p, int64_t i, M v) {
  p[i] = ew::cast_value<T>(v);
}

// Walks channel ch's elements e = first, first + kThreads, ... below end, calling f(flat index
// in x [n, c, spatial]) for each in order; the index advances without a division per element.
template <typename F>
AMPC_HD void for_thread_elements(int64_t ch, int64_t c, int64_t spatial, int64_t first, int64_t end,
                                 F&& f) {
  if (first >= end) return;
  int64_t i = first / spatial, j = first - i * spatial;
  const int64_t step_i = kThreads / spatial, step_j = kThreads - step_i * spatial;
  for (int64_t e = first; e < end; e += kThreads) {
    f((i * c + ch) * spatial + j);
    i += step_i;
    j += step_j;
    if (j >= spatial) {
      j -= spatial;
      ++i;
    }
  }
}

// One thread's contribution to a chunk's sum (pass 1) or sum of squared deviations from m
// (pass 2): elements begin + t, begin + t + kThreads, ... below end.
template <typename M, typename T>
AMPC_HD M thread_sum(const T* x, int64_t ch, int64_t c, int64_t spatial, int64_t begin, int64_t end,
                     int t) {
  M acc = M(0);
  for_thread_elements(ch, c, spatial, begin + t, end,
                      [&](int64_t k) { acc = add(acc, b_load<M>(x, k)); });
  return acc;
}
template <typename M, typename T>
AMPC_HD M thread_sq_dev(const T* x, int64_t ch, int64_t c, int64_t spatial, int64_t begin,
                        int64_t end, int t, M m) {
  M acc = M(0);
  for_thread_elements(ch, c, spatial, begin + t, end, [&](int64_t k) {
    const M d = sub(b_load<M>(x, k), m);
    acc = add(acc, mul(d, d));
  });
  return acc;
}

// Sum of a channel's chunk results parts[0..splits) in order, divided by count (0 if empty).
template <typename M>
AMPC_HD M combine_mean(const M* parts, int64_t splits, int64_t count) {
  M s = M(0);
  for (int64_t k = 0; k < splits; ++k) s = add(s, parts[k]);
  return count ? div(s, static_cast<M>(count)) : M(0);
}

// The folded affine map of a channel.
template <typename M>
AMPC_HD void fold(M scale, M bias, M mean, M var, M eps, M* a, M* b) {
  *a = div(scale, sqrt_rn(add(var, eps)));
  *b = sub(bias, mul(mean, *a));
}

// Inference: channel ch's affine map folded from the parameters and running statistics.
template <typename M, typename P, typename S>
AMPC_HD void fold_channel(int64_t ch, const P* scale, const P* bias, const S* mean, const S* var,
                          M eps, M* a, M* b) {
  fold(b_load<M>(scale, ch), b_load<M>(bias, ch), b_load<M>(mean, ch), b_load<M>(var, ch), eps, a,
       b);
}

template <typename M>
AMPC_HD M affine(M a, M b, M x) {
  return add(mul(a, x), b);
}

// running * momentum + batch * (1 - momentum).
template <typename M>
AMPC_HD M running_update(M running, M batch, M momentum) {
  return add(mul(running, momentum), mul(batch, sub(M(1), momentum)));
}

// Channel ch's epilogue: mean and biased variance from the chunks' sums, the folded affine map
// (*a, *b), and the statistics outputs that are not null.
template <typename M, typename P, typename S>
AMPC_HD void finish_channel(int64_t ch, int64_t splits, int64_t count, const M* part_sum,
                            const M* part_sq, const P* scale, const P* bias, const S* mean,
                            const S* var, M eps, M momentum, S* running_mean, S* running_var,
                            S* saved_mean, S* saved_var, M* a, M* b) {
  const M m = combine_mean(part_sum + ch * splits, splits, count);
  const M v = combine_mean(part_sq + ch * splits, splits, count);
  fold(b_load<M>(scale, ch), b_load<M>(bias, ch), m, v, eps, a, b);
  if (running_mean) b_store(running_mean, ch, running_update(b_load<M>(mean, ch), m, momentum));
  if (running_var) b_store(running_var, ch, running_update(b_load<M>(var, ch), v, momentum));
  if (saved_mean) b_store(saved_mean, ch, m);
  if (saved_var) b_store(saved_var, ch, v);
}

// Backward of training mode (BatchNormalizationGrad; PyTorch's batch_norm_backward): with the
// batch statistics m, v recomputed as above (the forward's bits) and inv = 1 / sqrt(v + eps),
//   dbias  = sum(dy)
//   dscale = sum(dy * (x - m)) * inv
//   dx     = (dy - dbias / count - (x - m) * inv * (dscale / count)) * (scale * inv)
// The two sums follow the statistics' order (chunks, threads, tree, chunks in order), and are
// taken in the walk that sums the squared deviations (one pass over x and dy after the mean's).

// One thread's squared deviations from m (thread_sq_dev's bits) and sums of dy and of
// dy * (x - m) over its elements of a chunk.
template <typename M, typename T>
AMPC_HD void thread_grad_sums(const T* x, const T* dy, int64_t ch, int64_t c, int64_t spatial,
                              int64_t begin, int64_t end, int t, M m, M* sq_dev, M* sum_dy,
                              M* sum_dyx) {
  M q = M(0), a = M(0), b = M(0);
  for_thread_elements(ch, c, spatial, begin + t, end, [&](int64_t k) {
    const M d = sub(b_load<M>(x, k), m);
    const M g = b_load<M>(dy, k);
    q = add(q, mul(d, d));
    a = add(a, g);
    b = add(b, mul(g, d));
  });
  *sq_dev = q;
  *sum_dy = a;
  *sum_dyx = b;
}

// A channel's coefficients of dx: dx = (dy - mean_dy - (x - mean) * inv * mean_dyxhat) * k.
template <typename M>
struct GradCoefficients {
  M mean, inv, mean_dy, mean_dyxhat, k;
};

template <typename M>
AMPC_HD M grad_dx(const GradCoefficients<M>& g, M x, M dy) {
  const M xhat = mul(sub(x, g.mean), g.inv);
  return mul(sub(sub(dy, g.mean_dy), mul(xhat, g.mean_dyxhat)), g.k);
}

// Sum of a channel's chunk results parts[0..splits) in order.
template <typename M>
AMPC_HD M combine_sum(const M* parts, int64_t splits) {
  M s = M(0);
  for (int64_t k = 0; k < splits; ++k) s = add(s, parts[k]);
  return s;
}

// Channel ch's epilogue of the backward: the statistics from the chunks' sums and squared
// deviations, the parameter gradients (each may be null) and dx's coefficients.
template <typename M, typename P>
AMPC_HD void finish_grad_channel(int64_t ch, int64_t splits, int64_t count, const M* part_sum,
                                 const M* part_sq, const M* part_dy, const M* part_dyx,
                                 const P* scale, M eps, P* dscale, P* dbias,
                                 GradCoefficients<M>* g) {
  const M m = combine_mean(part_sum + ch * splits, splits, count);
  const M v = combine_mean(part_sq + ch * splits, splits, count);
  const M inv = div(M(1), sqrt_rn(add(v, eps)));
  const M sum_dy = combine_sum(part_dy + ch * splits, splits);
  const M ds = mul(combine_sum(part_dyx + ch * splits, splits), inv);
  if (dbias) b_store(dbias, ch, sum_dy);
  if (dscale) b_store(dscale, ch, ds);
  const M n = static_cast<M>(count);
  g->mean = m;
  g->inv = inv;
  g->mean_dy = count ? div(sum_dy, n) : M(0);
  g->mean_dyxhat = count ? div(ds, n) : M(0);
  g->k = mul(b_load<M>(scale, ch), inv);
}

}  // namespace ampc::kernels::shared::bn
