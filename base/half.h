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

// The fp16 conversions are written without branches (selects on masks, fp32 arithmetic), so
// that loops around them vectorise (the CPU ops' loads and stores, kernels/cpu's
// elementwise_types.h) and GPU threads do not diverge; this is the one definition, for the host
// and the device. The trick (scaling through the fp32 unit so that its own round-to-nearest-even
// does the rounding) is the one of M. Maratyszcza's FP16 library; it needs IEEE fp32 with
// subnormals (no flush-to-zero). tests/unit/half_bits_test.cc checks every fp16 value and a
// spread of fp32 values (all of them once, offline) against the CPU's F16C instructions.

// cond ? a : b with masks instead of a branch (GCC keeps branches around fp32 arithmetic).
AMPC_HALF_HD uint32_t select_bits(bool cond, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return (a & mask) | (b & ~mask);
}

// Exact. A NaN keeps its payload (a signalling one stays signalling).
AMPC_HALF_HD float half_to_float(Half h) {
  const uint32_t w = static_cast<uint32_t>(h.bits) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;  // exponent and mantissa at the top, sign dropped
  // Normal: move the fields and add 224 to the exponent, then scale by 2^-112 exactly. For inf
  // and nan the moved bits are already the fp32 result (exponent 31 + 224 = 255); they skip the
  // multiplication, which would quiet a signalling nan.
  const uint32_t moved = (two_w >> 4) + (0xe0u << 23);
  const float normalized = bits_float(moved) * 0x1.0p-112f;
  // Subnormal: the mantissa under the exponent of 0.5, minus 0.5, is mantissa * 2^-24 exactly.
  const float denormalized = bits_float((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t finite =
      select_bits(two_w < (1u << 27), float_bits(denormalized), float_bits(normalized));
  const uint32_t magnitude = select_bits(two_w >= 0xf8000000u, moved, finite);
  return bits_float(sign | magnitude);
}

// Round to nearest, ties to even; beyond fp16's range (|f| >= 65520) infinity; a NaN keeps the
// top of its payload, quieted.
AMPC_HALF_HD Half float_to_half(float f) {
  const uint32_t w = float_bits(f);
  const uint32_t shl1_w = w + w;  // sign dropped
  const uint32_t sign = w & 0x80000000u;
  // |f| scaled up then down: values beyond fp16's range become inf, and the product rounds
  // nothing (powers of two) except through the fp32 overflow. It is exact, so a compiler that
  // contracts the second product and the addition below into an FMA gets the same result.
  float base = (bits_float(w & 0x7fffffffu) * 0x1.0p+112f) * 0x1.0p-110f;
  // Adding 2^(e + 13) (at least 2^-1 * 2^-14 for subnormal results) makes the fp32 addition
  // round |f| to fp16's precision, ties to even, in one step.
  uint32_t bias = shl1_w & 0xff000000u;
  bias = select_bits(bias < 0x71000000u, 0x71000000u, bias);
  base = bits_float((bias >> 1) + 0x07800000u) + base;
  const uint32_t b = float_bits(base);
  const uint32_t nonsign = ((b >> 13) & 0x7c00u) + (b & 0x0fffu);
  const uint32_t nan = 0x7e00u | ((w >> 13) & 0x3ffu);
  return {static_cast<uint16_t>((sign >> 16) | select_bits(shl1_w > 0xff000000u, nan, nonsign))};
}

AMPC_HALF_HD float bf16_to_float(BFloat16 b) {
  return bits_float(static_cast<uint32_t>(b.bits) << 16);
}

// Round to nearest, ties to even; a NaN keeps the top of its payload, quieted.
AMPC_HALF_HD BFloat16 float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return {static_cast<uint16_t>(select_bits((u & 0x7fffffffu) > 0x7f800000u, quiet_nan, rounded))};
}

}  // namespace ampc
