#include "kernels/cpu/norm.h"

#include <cmath>

#include "kernels/cpu/reduce.h"

namespace ampc::kernels::cpu {
namespace {

constexpr int64_t kParallelWork = 1 << 17;

// Mean and biased variance of v[0..len) (two passes).
template <typename T>
void moments(const T* v, int64_t len, T* mean, T* var) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < len; ++i) s += v[i];
  const T m = len ? s / static_cast<T>(len) : T(0);
  T q = 0;
#pragma omp simd reduction(+ : q)
  for (int64_t i = 0; i < len; ++i) q += (v[i] - m) * (v[i] - m);
  *mean = m;
  *var = len ? q / static_cast<T>(len) : T(0);
}

}  // namespace

template <typename T>
void lrn(const T* x, int64_t n, int64_t c, int64_t spatial, int64_t size, T alpha, T beta, T bias,
         T* y) {
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  const T coef = alpha / static_cast<T>(size);
#pragma omp parallel for collapse(2) if (n * c * spatial > kParallelWork)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t lo = ch - before < 0 ? 0 : ch - before;
      const int64_t hi = ch + after >= c ? c - 1 : ch + after;
      T* yp = y + (i * c + ch) * spatial;
      for (int64_t s = 0; s < spatial; ++s) yp[s] = 0;
      for (int64_t k = lo; k <= hi; ++k) {
        const T* xk = x + (i * c + k) * spatial;
        for (int64_t s = 0; s < spatial; ++s) yp[s] += xk[s] * xk[s];
      }
      const T* xp = x + (i * c + ch) * spatial;
      for (int64_t s = 0; s < spatial; ++s) {
        yp[s] = xp[s] / std::pow(bias + coef * yp[s], beta);
      }
    }
  }
}

template <typename T>
void mean_variance_norm(const T* x, const std::vector<int64_t>& dims,
                        const std::vector<bool>& reduced, T eps, T* y) {
  const size_t rank = dims.size();
  int64_t total = 1, kept = 1;
  for (size_t i = 0; i < rank; ++i) {
    total *= dims[i];
    if (!reduced[i]) kept *= dims[i];
  }
  std::vector<int64_t> stat_stride(rank, 0);
  for (int64_t i = static_cast<int64_t>(rank) - 1, s = 1; i >= 0; --i) {
    if (!reduced[i]) {
      stat_stride[i] = s;
      s *= dims[i];
    }
  }
  // Calls f(j, at) for every element j of x; `at` is its position in the kept-axes statistics.
  auto each = [&](auto f) {
    std::vector<int64_t> idx(rank, 0);
    int64_t at = 0;
    for (int64_t j = 0; j < total; ++j) {
      f(j, at);
      for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
        at += stat_stride[d];
        if (++idx[d] < dims[d]) break;
        at -= stat_stride[d] * dims[d];
        idx[d] = 0;
      }
    }
  };
  std::vector<T> mean(kept), var(kept);
  reduce(ReduceKind::kMean, x, dims, reduced, mean.data());
  // Two passes: the mean of squared deviations, not E[x^2] - E[x]^2, which cancels
  // catastrophically when the mean is large against the spread.
  std::vector<T> sq(static_cast<size_t>(total));
  each([&](int64_t j, int64_t at) { sq[j] = (x[j] - mean[at]) * (x[j] - mean[at]); });
  reduce(ReduceKind::kMean, sq.data(), dims, reduced, var.data());
  for (int64_t k = 0; k < kept; ++k) var[k] = std::sqrt(var[k]) + eps;  // now the divisor
  each([&](int64_t j, int64_t at) { y[j] = (x[j] - mean[at]) / var[at]; });
}

#define AMPC_INSTANTIATE(T)                                                        \
  template void lrn<T>(const T*, int64_t, int64_t, int64_t, int64_t, T, T, T, T*); \
  template void mean_variance_norm<T>(const T*, const std::vector<int64_t>&,       \
                                      const std::vector<bool>&, T, T*);
AMPC_INSTANTIATE(float)
AMPC_INSTANTIATE(double)
#undef AMPC_INSTANTIATE

}  // namespace ampc::kernels::cpu
