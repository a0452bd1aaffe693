// 16-bit floating-point storage types and their conversions to and from fp32, with
// round-to-nearest-even (ties to even) as IEEE 754 and CUDA's __float2half_rn do.
// Header-only and free of the standard library beyond <cstdint>/<cstring> so that the same
// scalar code compiles for the host and the device: under nvcc every function here is
// __host__ __device__ (kernels/shared/rowwise_fp.h's conversions are these).
#pragma once

#include <cstdint>
#include <cstring>

// As kernels/shared/hd.h's AMPC_HD (base depends on nothing).
#if defined(__CUDACC__)
#define AMPC_HALF_HD __host__ __device__ __forceinline__
#else
#define AMPC_HALF_HD inline
#endif

namespace ampc {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

// The compiler's bit cast (what std::bit_cast is built on), for the host and the device alike.
AMPC_HALF_HD uint32_t float_bits(float f) {
  return __builtin_bit_cast(uint32_t, f);
}
AMPC_HALF_HD float bits_float(uint32_t u) {
  return __builtin_bit_cast(float, u);
}

AMPC_HALF_HD float half_to_float(Half h) {
  const uint32_t sign = (h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1f;
  const uint32_t mant = h.bits & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    // Subnormal: value = mant * 2^-24, exact in fp32.
    const float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

AMPC_HALF_HD Half float_to_half(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan (keep nan quiet and non-zero)
    return {static_cast<uint16_t>(sign | 0x7c00u |
                                  (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0))};
  }
  if (abs >= 0x477ff000u)
    return {static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: scale so the integer part is the half mantissa.
    // Adding 0.5f in fp32 would double-round; do it with integers instead.
    if (abs < 0x33000000u) return {sign};  // below half the smallest subnormal: zero
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14 + (127 - 1 - exp) ... places to drop
    const uint32_t kept = mant >> (shift);
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    uint32_t r = kept + ((rem > halfway || (rem == halfway && (kept & 1))) ? 1 : 0);
    return {static_cast<uint16_t>(sign | r)};
  }
  // Normal: rebias exponent, round the 13 dropped bits to nearest even.
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return {static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13))};
}

AMPC_HALF_HD float bf16_to_float(BFloat16 b) {
  return bits_float(static_cast<uint32_t>(b.bits) << 16);
}

AMPC_HALF_HD BFloat16 float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return {static_cast<uint16_t>((u >> 16) | 0x40u)};  // quiet nan
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<uint16_t>(rounded >> 16)};
}

}  // namespace ampc
