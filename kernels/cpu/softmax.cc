#include "kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ampc::kernels::cpu {
namespace {

// exp for the fp32 math of softmax, on GCC vector extensions so that it is vectorised
// whatever the target flags: Cody-Waite range reduction and Cephes' degree-6 polynomial
// (within 2 ulp). Underflows to 0 below -87.3 (where exp is subnormal); NaN stays NaN.
typedef float V4 __attribute__((vector_size(16)));
typedef int32_t V4i __attribute__((vector_size(16)));
typedef float V8 __attribute__((vector_size(32)));
typedef int32_t V8i __attribute__((vector_size(32)));
// exp over the lanes of *v (in place: a 32-byte vector passed by value would change the
// ABI of code built without AVX).
template <typename V, typename Vi>
__attribute__((always_inline)) inline void expv(V* v) {
  const V x = *v;
  const V lo = V{} - 87.33654f, hi = V{} + 88.72283f, magic = V{} + 12582912.0f;
  V c = x < lo ? lo : x;
  c = c > hi ? hi : c;
  const V n = (c * 1.44269504088896341f + magic) - magic;  // round to integer
  V r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  V p = V{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const Vi bits = (__builtin_convertvector(n, Vi) + 127) << 23;  // 2^n
  V scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  V y = (p * r * r + r + 1.0f) * scale;
  y = x < lo ? V{} : y;
  *v = x != x ? x : y;
}
// y[j] = exp(x[j] - sub[j]) (sub == null: exp(x[j] - m)); returns the sum of y.
template <typename V, typename Vi>
__attribute__((always_inline)) inline float exp_sub_impl(const float* x, const float* sub, float m,
                                                         int64_t n, float* y) {
  constexpr int W = sizeof(V) / sizeof(float);
  V acc{}, a, b = V{} + m;
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    std::memcpy(&a, x + j, sizeof(a));
    if (sub) std::memcpy(&b, sub + j, sizeof(b));
    V e = a - b;
    expv<V, Vi>(&e);
    std::memcpy(y + j, &e, sizeof(e));
    acc += e;
  }
  float s = 0;
  for (int l = 0; l < W; ++l) s += acc[l];
  if (j < n) {  // the last few elements
    a = V{};
    b = V{} + m;
    std::memcpy(&a, x + j, sizeof(float) * (n - j));
    if (sub) std::memcpy(&b, sub + j, sizeof(float) * (n - j));
    V e = a - b;
    expv<V, Vi>(&e);
    for (int64_t l = 0; l < n - j; ++l) {
      y[j + l] = e[l];
      s += e[l];
    }
  }
  return s;
}
__attribute__((target("avx2,fma"))) float exp_sub_avx2(const float* x, const float* sub, float m,
                                                       int64_t n, float* y) {
  return exp_sub_impl<V8, V8i>(x, sub, m, n, y);
}
float exp_sub_sse(const float* x, const float* sub, float m, int64_t n, float* y) {
  return exp_sub_impl<V4, V4i>(x, sub, m, n, y);
}
// Eight lanes with AVX2 + FMA where the CPU has them (the build targets plain x86-64).
float exp_sub(const float* x, const float* sub, float m, int64_t n, float* y) {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx2 ? exp_sub_avx2(x, sub, m, n, y) : exp_sub_sse(x, sub, m, n, y);
}

double exp_sub(const double* x, const double* sub, double m, int64_t n, double* y) {
  double s = 0;
  for (int64_t j = 0; j < n; ++j) {
    y[j] = std::exp(x[j] - (sub ? sub[j] : m));
    s += y[j];
  }
  return s;
}

// Eight independent running maxima: no loop-carried dependency on one register.
template <typename T>
T row_max(const T* x, int64_t n) {
  T acc[8];
  for (int l = 0; l < 8; ++l) acc[l] = x[0];
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
  }
  T m = acc[0];
  for (int l = 1; l < 8; ++l) m = acc[l] > m ? acc[l] : m;
  for (; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// One contiguous row of n elements.
template <typename T>
void softmax_row(SoftmaxKind kind, const T* x, int64_t n, T* y, T* scratch) {
  if (n == 0) return;
  if (kind == SoftmaxKind::kHardmax) {
    const int64_t arg = std::max_element(x, x + n) - x;  // the first maximum
    std::fill(y, y + n, T(0));
    y[arg] = T(1);
    return;
  }
  const T m = row_max(x, n);
  if (kind == SoftmaxKind::kSoftmax) {
    const T inv = T(1) / exp_sub(x, static_cast<const T*>(nullptr), m, n, y);
    for (int64_t j = 0; j < n; ++j) y[j] *= inv;
  } else {
    const T log_s = std::log(exp_sub(x, static_cast<const T*>(nullptr), m, n, scratch));
    // (x - m) - log_s: m + log_s would lose the low bits of large inputs.
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - m) - log_s;
  }
}

// n rows of `inner` contiguous elements, normalised column-wise.
template <typename T>
void softmax_strided(SoftmaxKind kind, const T* x, int64_t n, int64_t inner, T* y) {
  if (n == 0) return;
  std::vector<T> m(x, x + inner), s(inner, T(0)), e(inner);
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
    T* out = kind == SoftmaxKind::kSoftmax ? y + r * inner : e.data();
    exp_sub(row, m.data(), T(0), inner, out);
    for (int64_t i = 0; i < inner; ++i) s[i] += out[i];
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
#pragma omp parallel if (outer > 1 && outer * n > (1 << 17))
    {
      std::vector<T> scratch(kind == SoftmaxKind::kLogSoftmax ? n : 0);
#pragma omp for
      for (int64_t o = 0; o < outer; ++o) {
        softmax_row(kind, x + o * n, n, y + o * n, scratch.data());
      }
    }
    return;
  }
#pragma omp parallel for if (outer > 1 && outer * n * inner > (1 << 17))
  for (int64_t o = 0; o < outer; ++o) {
    softmax_strided(kind, x + o * n * inner, n, inner, y + o * n * inner);
  }
}

template void softmax<float>(SoftmaxKind, const float*, int64_t, int64_t, int64_t, float*);
template void softmax<double>(SoftmaxKind, const double*, int64_t, int64_t, int64_t, double*);

}  // namespace ampc::kernels::cpu
