#include "kernels/twin/pool_avx512.h"

#include <cmath>

#include "base/bf16_avx512.h"
#include "base/cpu_features.h"
#include "base/half.h"

namespace ampc::kernels::twin {
namespace {

// Each output's first maximum over its taps (argmax_window), sixteen outputs at a time; an
// output without taps keeps argmax_window's 0.
AMPC_AVX512BW void argmax_outputs(const TapTable& t, const float* xp, int32_t* arg) {
  const __m512i none = _mm512_set1_epi32(-1);
  for (int64_t o = 0; o < t.padded; o += 16) {
    __m512 best = _mm512_set1_ps(-INFINITY);
    __m512i at = _mm512_setzero_si512();
    __mmask16 have = 0;
    for (int64_t k = 0; k < t.taps; ++k) {
      const __m512i idx = _mm512_loadu_si512(t.offset.data() + k * t.padded + o);
      const __mmask16 valid = _mm512_cmpgt_epi32_mask(idx, none);
      if (!valid) break;  // no output of these sixteen has a k-th tap, nor a later one
      // Merging into zeros, not into best, keeps the gathers of successive taps independent.
      const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, idx, xp, 4);
      const __mmask16 take =
          valid & static_cast<__mmask16>(~have | _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ));
      best = _mm512_mask_mov_ps(best, take, v);
      at = _mm512_mask_mov_epi32(at, take, idx);
      have |= valid;
    }
    _mm512_storeu_si512(arg + o, at);
  }
}

// acc (zeroed) += each output's dy at its argmax, in output order.
template <typename T>
AMPC_AVX512BW_INLINE void scatter(const int32_t* arg, int64_t outputs, const T* dy, float* acc) {
  for (int64_t o = 0; o < outputs; ++o) {
    float d;
    if constexpr (sizeof(T) == 2) {
      d = bf16_to_float(BFloat16{dy[o]});  // exact widening
    } else {
      d = dy[o];
    }
    acc[arg[o]] = acc[arg[o]] + d;
  }
}

AMPC_AVX512BW void zero(float* p, int64_t n) {
  for (int64_t q = 0; q < n; q += 16)
    _mm512_mask_storeu_ps(p + q, avx512::first_lanes(n - q), _mm512_setzero_ps());
}

}  // namespace

bool pool_avx512_available() {
  return cpu_has_avx512_bw_vl();
}

AMPC_AVX512BW void max_pool_grad_plane_avx512(const TapTable& taps, bool bf16, int64_t image,
                                              const void* x, const void* dy, void* dx,
                                              float* scratch, int32_t* arg) {
  if (!bf16) {  // f32: dx itself is the accumulator
    float* out = static_cast<float*>(dx);
    argmax_outputs(taps, static_cast<const float*>(x), arg);
    zero(out, image);
    scatter(arg, taps.outputs, static_cast<const float*>(dy), out);
    return;
  }
  float *xs = scratch, *acc = scratch + image;
  avx512::widen(static_cast<const uint16_t*>(x), image, xs);
  argmax_outputs(taps, xs, arg);
  zero(acc, image);
  scatter(arg, taps.outputs, static_cast<const uint16_t*>(dy), acc);
  uint16_t* out = static_cast<uint16_t*>(dx);
  for (int64_t q = 0; q < image; q += 16) {
    const __mmask16 live = avx512::first_lanes(image - q);
    avx512::store(out + q, live, _mm512_maskz_loadu_ps(live, acc + q));
  }
}

}  // namespace ampc::kernels::twin
