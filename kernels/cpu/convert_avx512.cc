// The build targets plain x86-64, so these loops carry target("avx512f,avx512bw,avx512vl")
// and run only where the CPU has all three (base/cpu_features.h). The rounding is
// base/half.h's float_to_bf16 written on 16 lanes: add 0x7fff plus the kept bit's parity,
// keep the high half, and where the input is a NaN take its high half with the quiet bit set
// instead. vcvtneps2bf16 (AVX512-BF16) is not used: it flushes subnormal inputs to zero,
// which PyTorch's rounding does not.
#include "kernels/cpu/convert_avx512.h"

#include "base/cpu_features.h"

// GCC 12's AVX-512 intrinsics warn about their own undefined pass-through values where
// inlined (GCC bug 105593); the pragma around the header silences exactly these.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#define AMPC_AVX512BW [[gnu::target("avx512f,avx512bw,avx512vl")]]
#define AMPC_AVX512BW_INLINE [[gnu::target("avx512f,avx512bw,avx512vl"), gnu::always_inline]] inline

namespace ampc::kernels::cpu {

bool convert_avx512_available() {
  return cpu_has_avx512_bw_vl();
}

namespace {

// 16 f32 bit patterns -> their bf16 bit patterns, in the low halves of the lanes.
AMPC_AVX512BW_INLINE __m512i round_to_bf16(__m512i u) {
  const __m512i parity = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i bias = _mm512_add_epi32(parity, _mm512_set1_epi32(0x7fff));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
  const __m512i magnitude = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_mov_epi32(rounded, nan, quiet);
}

}  // namespace

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

}  // namespace ampc::kernels::cpu
