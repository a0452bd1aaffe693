// Scalar floating-point building blocks of the row-wise, reduction and AMP kernels, compiled by
// nvcc (device) and g++ (their CPU twins) so that both compute the same bits:
// - arithmetic with one explicit rounding per operation: nvcc contracts a * b + c into an FMA
//   unless told otherwise, so device code goes through the __f*_rn intrinsics (never fused);
//   fused steps are written as fma() on both sides (std::fma is correctly rounded too). The
//   host side assumes no -ffp-contract=fast on an FMA target (the build targets plain x86-64);
// - fp16 / bf16 <-> fp32 conversions: base/half.h's (round-to-nearest-even, NaN payload kept
//   and quieted) on both sides, so the device does not depend on cuda_fp16's NaN choices;
// - log built from those operations (within 2 ulp), so that log-softmax and cross-entropy give
//   the same bits on both sides instead of two libraries' results (exp, built the same way, is
//   float_math.h's exp_f32, which the elementwise ops and fused kernels share).
#pragma once

#include <cstdint>

#include "base/half.h"
#include "kernels/shared/hd.h"

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace ampc::kernels::shared {

// base/half.h's bit casts, under the names kernels/shared uses.
AMPC_HD uint32_t to_bits(float f) {
  return float_bits(f);
}
AMPC_HD float from_bits(uint32_t u) {
  return bits_float(u);
}

// fp32 arithmetic, one rounding each (never contracted).
AMPC_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
AMPC_HD float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
AMPC_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
AMPC_HD float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
AMPC_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
AMPC_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
// fp64, for the AMP ops that accumulate in double as the CPU op does, and the f64 pooling and
// BatchNorm kernels.
AMPC_HD double add(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
AMPC_HD double sub(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
AMPC_HD double mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
AMPC_HD double div(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
AMPC_HD double sqrt_rn(double a) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

AMPC_HD bool is_nan(float v) {
  return (to_bits(v) & 0x7fffffffu) > 0x7f800000u;
}
AMPC_HD bool is_nan(double v) {
  return v != v;
}
AMPC_HD bool is_finite(float v) {
  return (to_bits(v) & 0x7f800000u) != 0x7f800000u;
}
AMPC_HD bool is_finite(double v) {
  return v - v == 0.0;
}  // inf - inf and NaN give NaN

// base/half.h's conversions (one definition, compiled for the device too).
AMPC_HD float load_half(Half h) {
  return half_to_float(h);
}
AMPC_HD Half round_half(float f) {
  return float_to_half(f);
}
AMPC_HD float load_bf16(BFloat16 b) {
  return bf16_to_float(b);
}
AMPC_HD BFloat16 round_bf16(float f) {
  return float_to_bf16(f);
}

// Storage type <-> compute type ("opmath"): fp32 for f16 / bf16 (exact loads, one rounding at
// the store), the type itself otherwise (f32, f64, and the integers of pooling and ScatterND).
template <typename T>
struct Elem {
  using Math = T;
  AMPC_HD static T load(T v) { return v; }
  AMPC_HD static T store(T v) { return v; }
};
template <>
struct Elem<Half> {
  using Math = float;
  AMPC_HD static float load(Half v) { return load_half(v); }
  AMPC_HD static Half store(float v) { return round_half(v); }
};
template <>
struct Elem<BFloat16> {
  using Math = float;
  AMPC_HD static float load(BFloat16 v) { return load_bf16(v); }
  AMPC_HD static BFloat16 store(float v) { return round_bf16(v); }
};

template <typename T>
AMPC_HD float load_f(const T* p, int64_t i) {
  return Elem<T>::load(p[i]);
}
template <typename T>
AMPC_HD void store_f(T* p, int64_t i, float v) {
  p[i] = Elem<T>::store(v);
}

// log(x) in fp32 (Cephes logf: mantissa in [sqrt(1/2), sqrt(2)), degree-8 polynomial, within
// 2 ulp). log(0) = -inf, log(negative) = NaN, log(inf) = inf, NaN stays NaN; subnormal inputs
// are scaled up first.
AMPC_HD float log_f(float x) {
  if (is_nan(x)) return x;
  if (x < 0.0f) return from_bits(0x7fc00000u);
  if (x == 0.0f) return from_bits(0xff800000u);
  if (!is_finite(x)) return x;
  int e = 0;
  if (x < 1.17549435e-38f) {  // subnormal: times 2^25, exactly
    x = mul(x, 33554432.0f);
    e = -25;
  }
  const uint32_t u = to_bits(x);
  e += static_cast<int>(u >> 23) - 126;
  float m = from_bits((u & 0x007fffffu) | 0x3f000000u);  // in [0.5, 1)
  if (m < 0.707106781186547524f) {
    m = add(m, m);
    e -= 1;
  }
  const float f = sub(m, 1.0f);  // exact (Sterbenz)
  const float z = mul(f, f);
  float p = 7.0376836292e-2f;
  p = fma_rn(p, f, -1.1514610310e-1f);
  p = fma_rn(p, f, 1.1676998740e-1f);
  p = fma_rn(p, f, -1.2420140846e-1f);
  p = fma_rn(p, f, 1.4249322787e-1f);
  p = fma_rn(p, f, -1.6668057665e-1f);
  p = fma_rn(p, f, 2.0000714765e-1f);
  p = fma_rn(p, f, -2.4999993993e-1f);
  p = fma_rn(p, f, 3.3333331174e-1f);
  float y = mul(mul(p, f), z);  // f^3 P(f)
  const float fe = static_cast<float>(e);
  y = fma_rn(fe, -2.12194440e-4f, y);
  y = fma_rn(z, -0.5f, y);
  return fma_rn(fe, 0.693359375f, add(f, y));
}

}  // namespace ampc::kernels::shared
