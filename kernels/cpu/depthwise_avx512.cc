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
AMPC_AVX512BW_INLINE float runs(const T* dy, const T* x, const DepthwiseRun* r, int64_t count,
                                float* acc, int64_t positions) {
  for (int64_t i = 0; i < count; ++i) {
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < r[i].len; j += 16) {
      const __mmask16 live = first_lanes(r[i].len - j);
      sum = _mm512_fmadd_ps(load(dy + r[i].dy_at + j, live), load(x + r[i].x_at + j, live), sum);
    }
    acc[r[i].kk] += _mm512_reduce_add_ps(sum);
  }
  __m512 bias = _mm512_setzero_ps();
  for (int64_t j = 0; j < positions; j += 16)
    bias = _mm512_add_ps(bias, load(dy + j, first_lanes(positions - j)));
  return _mm512_reduce_add_ps(bias);
}

}  // namespace

AMPC_AVX512BW float depthwise_runs_avx512(const float* dy, const float* x, const DepthwiseRun* r,
                                          int64_t count, float* acc, int64_t positions) {
  return runs(dy, x, r, count, acc, positions);
}

AMPC_AVX512BW float depthwise_runs_avx512(const uint16_t* dy, const uint16_t* x,
                                          const DepthwiseRun* r, int64_t count, float* acc,
                                          int64_t positions) {
  return runs(dy, x, r, count, acc, positions);
}

}  // namespace ampc::kernels::cpu
