// The weight and bias gradients of a depthwise convolution (group == input channels: each
// output channel o reads the one input channel o / (m / c)), summed directly:
//   dw[o, 0, k] = sum over images and output positions of dy[n, o, col] * x[n, o / (m/c), tap],
//   db[o]       = sum over images and output positions of dy[n, o, col].
// Why not oneDNN: 2.6's depthwise backward-weights kernel refuses outputs smaller than the
// window (MobileNet's last blocks on small images: 2x2 and 1x1 maps under a 3x3 window) and
// its fallback runs one tiny GEMM per channel, 15 ms for a 960-channel layer whose gradient is
// 0.3 M multiply-adds. See conv.h for the geometry.
#pragma once

#include <cstdint>

#include "base/half.h"
#include "kernels/cpu/conv.h"

namespace ampc::kernels::cpu {

// dw [m, 1, kernel] and db [m] (db may be null), every element written; x [n, c, image],
// dy [n, m, cols], m a multiple of c. float and double accumulate in their own type; bf16
// accumulates in fp32 and rounds each gradient once.
void depthwise_weight_grad(const ConvGeom& g, const float* dy, const float* x, float* dw, float* db,
                           int64_t n, int64_t c, int64_t m);
void depthwise_weight_grad(const ConvGeom& g, const double* dy, const double* x, double* dw,
                           double* db, int64_t n, int64_t c, int64_t m);
void depthwise_weight_grad(const ConvGeom& g, const BFloat16* dy, const BFloat16* x, BFloat16* dw,
                           BFloat16* db, int64_t n, int64_t c, int64_t m);

}  // namespace ampc::kernels::cpu
