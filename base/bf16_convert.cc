// The build targets plain x86-64, so these loops carry target("avx512f,avx512bw,avx512vl")
// and run only where the CPU has all three (base/cpu_features.h). The rounding is
// base/bf16_avx512.h's: base/half.h's float_to_bf16 on 16 lanes.
#include "base/bf16_convert.h"

#include "base/bf16_avx512.h"
#include "base/cpu_features.h"

namespace ampc {

using avx512::round_to_bf16;

bool convert_avx512_available() {
  return cpu_has_avx512_bw_vl();
}

AMPC_AVX512BW void f32_to_bf16_avx512(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_loadu_si512(x + i);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm512_cvtepi32_epi16(round_to_bf16(u)));
  }
  if (i < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i u = _mm512_maskz_loadu_epi32(tail, x + i);
    _mm512_mask_cvtepi32_storeu_epi16(y + i, tail, round_to_bf16(u));
  }
}

AMPC_AVX512BW void bf16_to_f32_avx512(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    _mm512_storeu_si512(y + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  if (i < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m256i h = _mm256_maskz_loadu_epi16(tail, x + i);
    _mm512_mask_storeu_epi32(y + i, tail, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

}  // namespace ampc
