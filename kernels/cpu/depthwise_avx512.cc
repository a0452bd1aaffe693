// The loops of depthwise_avx512.h. The build targets plain x86-64, so they carry
// target("avx512f,avx512bw,avx512vl") (base/bf16_avx512.h) and run only where the CPU has all
// three.
#include "kernels/cpu/depthwise_avx512.h"

#include "base/bf16_avx512.h"

namespace ampc::kernels::cpu {
namespace {

using avx512::first_lanes;
using avx512::lane_index;
using avx512::load;
using avx512::widen;

template <typename T>
AMPC_AVX512BW_INLINE void runs(const T* dy, const T* x, const DepthwiseRun* r, int64_t count,
                               float* lanes, int64_t positions, float* bias) {
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t j = 0; j < r[i].len; j += 16) {
      const __mmask16 live = first_lanes(r[i].len - j);
      sum = _mm512_fmadd_ps(load(dy + r[i].dy_at + j, live), load(x + r[i].x_at + j, live), sum);
    }
    if (i + 1 == count || r[i + 1].kk != r[i].kk) {  // the last run of this kk
      float* to = lanes + r[i].kk * 16;
      _mm512_storeu_ps(to, _mm512_add_ps(_mm512_loadu_ps(to), sum));
      sum = _mm512_setzero_ps();
    }
  }
  if (positions == 0) return;
  __m512 b = _mm512_loadu_ps(bias);
  for (int64_t j = 0; j < positions; j += 16)
    b = _mm512_add_ps(b, load(dy + j, first_lanes(positions - j)));
  _mm512_storeu_ps(bias, b);
}

template <typename T>
AMPC_AVX512BW_INLINE void channels(const DepthwiseChannels& p, const T* dy, const T* x,
                                   const DepthwiseRun* r, int64_t count, int64_t o0, int64_t lanes,
                                   float* dw, float* db, float* scratch) {
  const __mmask16 live = first_lanes(lanes);
  const __m512i lane = lane_index();
  const __m512i dy_plane =
      _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int>(p.positions)));
  const __m512i x_plane = _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int>(p.image)));
  float* dys = scratch;
  float* xs = dys + 16 * p.positions;
  float* taps = xs + 16 * p.image;  // lane l of taps[kk * 16 ..]: channel o0 + l's sum for kk
  __m512 bias = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < p.kernel; ++kk) _mm512_storeu_ps(taps + kk * 16, _mm512_setzero_ps());
  for (int64_t b = 0; b < p.n; ++b) {
    // The sixteen channels' planes of this image are contiguous: widened in one go.
    widen(dy + (b * p.channels + o0) * p.positions, p.positions * lanes, dys);
    widen(x + (b * p.channels + o0) * p.image, p.image * lanes, xs);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < count; ++i) {
      for (int64_t j = 0; j < r[i].len; ++j) {
        const __m512 d =
            _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, dy_plane, dys + r[i].dy_at + j, 4);
        const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, x_plane,
                                                  xs + r[i].x_at + j * p.stride, 4);
        sum = _mm512_fmadd_ps(d, v, sum);
      }
      if (i + 1 == count || r[i + 1].kk != r[i].kk) {
        float* to = taps + r[i].kk * 16;
        _mm512_storeu_ps(to, _mm512_add_ps(_mm512_loadu_ps(to), sum));
        sum = _mm512_setzero_ps();
      }
    }
    if (db)
      for (int64_t q = 0; q < p.positions; ++q)
        bias = _mm512_add_ps(
            bias, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, dy_plane, dys + q, 4));
  }
  for (int64_t l = 0; l < lanes; ++l)
    for (int64_t kk = 0; kk < p.kernel; ++kk) dw[l * p.kernel + kk] = taps[kk * 16 + l];
  if (db) _mm512_mask_storeu_ps(db, live, bias);
}

}  // namespace

AMPC_AVX512BW void depthwise_channels_avx512(const DepthwiseChannels& p, const float* dy,
                                             const float* x, const DepthwiseRun* r, int64_t count,
                                             int64_t o0, int64_t lanes, float* dw, float* db,
                                             float* scratch) {
  channels(p, dy, x, r, count, o0, lanes, dw, db, scratch);
}

AMPC_AVX512BW void depthwise_channels_avx512(const DepthwiseChannels& p, const uint16_t* dy,
                                             const uint16_t* x, const DepthwiseRun* r,
                                             int64_t count, int64_t o0, int64_t lanes, float* dw,
                                             float* db, float* scratch) {
  channels(p, dy, x, r, count, o0, lanes, dw, db, scratch);
}

AMPC_AVX512BW void depthwise_runs_avx512(const float* dy, const float* x, const DepthwiseRun* r,
                                         int64_t count, float* lanes, int64_t positions,
                                         float* bias) {
  runs(dy, x, r, count, lanes, positions, bias);
}

AMPC_AVX512BW void depthwise_runs_avx512(const uint16_t* dy, const uint16_t* x,
                                         const DepthwiseRun* r, int64_t count, float* lanes,
                                         int64_t positions, float* bias) {
  runs(dy, x, r, count, lanes, positions, bias);
}

}  // namespace ampc::kernels::cpu
