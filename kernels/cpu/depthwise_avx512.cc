// The loops of depthwise_avx512.h. The build targets plain x86-64, so they carry
// target("avx512f,avx512bw,avx512vl") (base/bf16_avx512.h) and run only where the CPU has all
// three.
#include "kernels/cpu/depthwise_avx512.h"

#include "base/bf16_avx512.h"

namespace ampc::kernels::cpu {
namespace {

using avx512::first_lanes;
using avx512::load;

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

}  // namespace

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
