// half.h's bf16 conversions on 16 lanes, for the hand-written AVX-512 loops: widening is a
// shift, rounding is half.h's float_to_bf16 written on vectors (add 0x7fff plus the kept bit's
// parity, keep the high half, and where the input is a NaN take its high half with the quiet
// bit set instead), so every lane gets the scalar conversion's bits. vcvtneps2bf16
// (AVX512-BF16) is not used: it flushes subnormal inputs to zero, which PyTorch's rounding does
// not. The build targets plain x86-64: include this only from files whose callers check
// cpu_features.h's cpu_has_avx512_bw_vl() first; every function here carries the target.
#pragma once

#include <cstdint>

// GCC 12's AVX-512 intrinsics warn about their own undefined pass-through values where
// inlined (GCC bug 105593; the shuffles and permutes say "is used uninitialized"); the pragma
// around the header silences exactly these.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#define AMPC_AVX512BW [[gnu::target("avx512f,avx512bw,avx512vl")]]
#define AMPC_AVX512BW_INLINE [[gnu::target("avx512f,avx512bw,avx512vl"), gnu::always_inline]] inline

namespace ampc::avx512 {

// The first n lanes (n <= 16).
AMPC_AVX512BW_INLINE __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

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

// The lanes of `m` loaded from p (bf16 bits widened exactly, or f32); the others are +0.
AMPC_AVX512BW_INLINE __m512 load(const uint16_t* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
AMPC_AVX512BW_INLINE __m512 load(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}

// n values (f32, or bf16 bits widened exactly) copied to out as f32, 16 at a time.
template <typename T>
AMPC_AVX512BW_INLINE void widen(const T* x, int64_t n, float* out) {
  for (int64_t q = 0; q < n; q += 16) {
    const __mmask16 live = first_lanes(n - q);
    _mm512_mask_storeu_ps(out + q, live, load(x + q, live));
  }
}

// Lane l holds l.
AMPC_AVX512BW_INLINE __m512i lane_index() {
  return _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
}

// The lanes of `m` stored to p (rounded once to bf16, or as f32).
AMPC_AVX512BW_INLINE void store(uint16_t* p, __mmask16 m, __m512 v) {
  _mm512_mask_cvtepi32_storeu_epi16(p, m, round_to_bf16(_mm512_castps_si512(v)));
}
AMPC_AVX512BW_INLINE void store(float* p, __mmask16 m, __m512 v) {
  _mm512_mask_storeu_ps(p, m, v);
}

}  // namespace ampc::avx512
