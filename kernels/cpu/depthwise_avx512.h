// The inner sums of depthwise_grad.cc's weight gradient on AVX-512 (a run: output positions
// dy[dy_at + j] paired with x[x_at + j * stride], j < len, for kernel offset kk), the bf16
// operands widened exactly, in two layouts:
// - rows of unit stride and several outputs: one image's and channel's runs, 16 products of a
//   run per instruction (depthwise_runs_avx512);
// - maps of a few positions (MobileNet's last blocks on small images, where oneDNN refuses the
//   problem and most runs are one or two products): sixteen channels side by side, each
//   product of a run for all of them in one instruction (depthwise_channels_avx512).
// The portable loop takes a run one product at a time; on the small maps that made the weight
// gradient 6% of mobilenet_v2's bf16 step at 32x32. Call only where
// convert_avx512_available() (AVX512F, BW and VL). The sums' order differs from the portable
// loop's, as its `omp simd` reduction already lets it (fp32 accumulation;
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

// Channels o0 .. o0 + lanes - 1 (lanes <= 16) of a depthwise convolution with one output
// channel per input channel: dy [n, channels, positions], x [n, channels, image]. For
// l < lanes: dw[l * kernel + kk] = channel o0 + l's sum over images and the runs of kk of the
// products, and (db not null) db[l] = its sum of dy over images and positions, in f32 (the
// caller rounds). scratch: room for 16 * (positions + image + kernel) floats.
struct DepthwiseChannels {
  int64_t n, channels, positions, image, kernel, stride;
};
void depthwise_channels_avx512(const DepthwiseChannels& p, const float* dy, const float* x,
                               const DepthwiseRun* runs, int64_t count, int64_t o0, int64_t lanes,
                               float* dw, float* db, float* scratch);
void depthwise_channels_avx512(const DepthwiseChannels& p, const uint16_t* dy, const uint16_t* x,
                               const DepthwiseRun* runs, int64_t count, int64_t o0, int64_t lanes,
                               float* dw, float* db, float* scratch);

}  // namespace ampc::kernels::cpu
