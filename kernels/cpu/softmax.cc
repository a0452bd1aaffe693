#include "kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ampc::kernels::cpu {
namespace {

// One contiguous row of n elements.
template <typename T>
void softmax_row(SoftmaxKind kind, const T* x, int64_t n, T* y) {
  if (n == 0) return;
  T m = x[0];
  int64_t arg = 0;
  for (int64_t j = 1; j < n; ++j) {
    if (x[j] > m) {
      m = x[j];
      arg = j;
    }
  }
  if (kind == SoftmaxKind::kHardmax) {
    std::fill(y, y + n, T(0));
    y[arg] = T(1);
    return;
  }
  T s = 0;
  if (kind == SoftmaxKind::kSoftmax) {
    for (int64_t j = 0; j < n; ++j) {
      y[j] = std::exp(x[j] - m);
      s += y[j];
    }
    const T inv = T(1) / s;
    for (int64_t j = 0; j < n; ++j) y[j] *= inv;
  } else {
    for (int64_t j = 0; j < n; ++j) s += std::exp(x[j] - m);
    const T log_s = std::log(s);  // (x - m) - log_s: m + log_s would lose x's low bits
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - m) - log_s;
  }
}

// n rows of `inner` contiguous elements, normalised column-wise.
template <typename T>
void softmax_strided(SoftmaxKind kind, const T* x, int64_t n, int64_t inner, T* y) {
  if (n == 0) return;
  std::vector<T> m(x, x + inner), s(inner, T(0));
  std::vector<int64_t> arg(inner, 0);
  for (int64_t r = 1; r < n; ++r) {
    const T* row = x + r * inner;
    for (int64_t i = 0; i < inner; ++i) {
      if (row[i] > m[i]) {
        m[i] = row[i];
        arg[i] = r;
      }
    }
  }
  if (kind == SoftmaxKind::kHardmax) {
    std::fill(y, y + n * inner, T(0));
    for (int64_t i = 0; i < inner; ++i) y[arg[i] * inner + i] = T(1);
    return;
  }
  for (int64_t r = 0; r < n; ++r) {
    const T* row = x + r * inner;
    T* out = y + r * inner;
    for (int64_t i = 0; i < inner; ++i) {
      const T e = std::exp(row[i] - m[i]);
      s[i] += e;
      if (kind == SoftmaxKind::kSoftmax) out[i] = e;
    }
  }
  for (int64_t i = 0; i < inner; ++i) {
    s[i] = kind == SoftmaxKind::kSoftmax ? T(1) / s[i] : std::log(s[i]);
  }
  for (int64_t r = 0; r < n; ++r) {
    const T* row = x + r * inner;
    T* out = y + r * inner;
    if (kind == SoftmaxKind::kSoftmax) {
      for (int64_t i = 0; i < inner; ++i) out[i] *= s[i];
    } else {
      for (int64_t i = 0; i < inner; ++i) out[i] = (row[i] - m[i]) - s[i];
    }
  }
}

}  // namespace

template <typename T>
void softmax(SoftmaxKind kind, const T* x, int64_t outer, int64_t n, int64_t inner, T* y) {
  if (inner == 1) {
#pragma omp parallel for if (outer > 1 && outer * n > (1 << 14))
    for (int64_t o = 0; o < outer; ++o) softmax_row(kind, x + o * n, n, y + o * n);
    return;
  }
#pragma omp parallel for if (outer > 1 && outer * n * inner > (1 << 14))
  for (int64_t o = 0; o < outer; ++o) {
    softmax_strided(kind, x + o * n * inner, n, inner, y + o * n * inner);
  }
}

template void softmax<float>(SoftmaxKind, const float*, int64_t, int64_t, int64_t, float*);
template void softmax<double>(SoftmaxKind, const double*, int64_t, int64_t, int64_t, double*);

}  // namespace ampc::kernels::cpu
