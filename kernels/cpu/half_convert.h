// fp16 <-> fp32 conversions without branches, for the kernels' inner loops: the same results
// as base/half.h's float_to_half / half_to_float (round-to-nearest-even, subnormals, overflow
// to inf, NaN payload kept and quieted) but written with selects and fp32 arithmetic so that
// the compiler vectorises the loops around them. base/half.h stays the scalar reference;
// tests compare the two (cpu_half_precision_test).
// The trick (scaling through the fp32 unit so that its own RNE does the rounding) is the one
// of M. Maratyszcza's FP16 library; it needs IEEE fp32 with subnormals (no flush-to-zero).
#pragma once

#include <cstdint>

#include "base/half.h"

namespace ampc::kernels::cpu {

// cond ? a : b with masks instead of a branch (GCC keeps branches around fp32 arithmetic).
inline uint32_t select_bits(bool cond, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return (a & mask) | (b & ~mask);
}

inline float half_to_float_fast(Half h) {
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

inline Half float_to_half_fast(float f) {
  const uint32_t w = float_bits(f);
  const uint32_t shl1_w = w + w;  // sign dropped
  const uint32_t sign = w & 0x80000000u;
  // |f| scaled up then down: values beyond fp16's range become inf, and the product rounds
  // nothing (powers of two) except through the fp32 overflow.
  float base = (bits_float(w & 0x7fffffffu) * 0x1.0p+112f) * 0x1.0p-110f;
  // Adding 2^(e + 13) (at least 2^-1 * 2^-14 for subnormal results) makes the fp32 addition
  // round |f| to fp16's precision, ties to even, in one step.
  uint32_t bias = shl1_w & 0xff000000u;
  bias = select_bits(bias < 0x71000000u, 0x71000000u, bias);
  base = bits_float((bias >> 1) + 0x07800000u) + base;
  const uint32_t b = float_bits(base);
  const uint32_t nonsign = ((b >> 13) & 0x7c00u) + (b & 0x0fffu);
  // NaN keeps the top of its payload, quieted, as base/half.h does.
  const uint32_t nan = 0x7e00u | ((w >> 13) & 0x3ffu);
  return {static_cast<uint16_t>((sign >> 16) | select_bits(shl1_w > 0xff000000u, nan, nonsign))};
}

}  // namespace ampc::kernels::cpu
