// The inner sums of depthwise_grad.cc's weight gradient on AVX-512, for rows of unit stride:
// one image's and output channel's runs (a run: output positions dy[dy_at + j] paired with
// x[x_at + j], j < len, for kernel offset kk), 16 products per instruction with the bf16
// operands widened exactly. The portable loop handles a run of a 2x2 or 4x4 map one element at
// a time, which made the weight gradient of MobileNet's depthwise layers 6% of its bf16 step.
// Call only where convert_avx512_available() (AVX512F, BW and VL). The sums' order differs
// from the portable loop's, as its `omp simd` reduction already lets it (fp32 accumulation;
// tests/unit/dnnl_numerics_test.cc bounds both against exact sums).
#pragma once

#include <cstdint>

namespace ampc::kernels::cpu {

struct DepthwiseRun {
  int64_t kk, dy_at, x_at, len;
};

// lanes[r.kk * 16 + l] += lane l of the products dy[r.dy_at + j] * x[r.x_at + j], j < r.len,
// for each of the `count` runs (lane l holds j = l, l + 16, ...; the caller adds the 16 lanes
// once, after its last image); bias[l] likewise for dy[0 .. positions) (none for 0). Runs of
// the same kk are consecutive (runs_of lists them by kk), so each kk's lanes are read and
// written once per call.
void depthwise_runs_avx512(const float* dy, const float* x, const DepthwiseRun* runs, int64_t count,
                           float* lanes, int64_t positions, float* bias);
// The same over bf16 bits.
void depthwise_runs_avx512(const uint16_t* dy, const uint16_t* x, const DepthwiseRun* runs,
                           int64_t count, float* lanes, int64_t positions, float* bias);

}  // namespace ampc::kernels::cpu
