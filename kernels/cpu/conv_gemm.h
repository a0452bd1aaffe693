// Convolutions whose weights outweigh their activations, as GEMMs on the weights' plain layout.
//
// The last stages of a CNN on small images (ResNet's 512-channel 3x3 convolutions on 1x1 and
// 2x2 maps at 32x32 input) have millions of weights and a few hundred output positions. oneDNN's
// direct kernels reorder the weights into their blocked layouts on every call (forward and
// backward data) and the weight gradient back out of one, and compute every tap of the window,
// though on a 1x1 map with padding 1 eight of a 3x3 window's nine taps read only padding. Here:
//
//   rows[r, (c, t)] = x[n, c, image index of tap t at output position p], r = n * P + p
//                    (tap-major, rows[r, (t, c)], for the weight gradient where r > m)
//   forward          y_n[m, p]     = W[m, (c, t)] . rows_n[p, (c, t)]^T   (batched over n)
//   backward data    drows_n[p, :] = dy_n[:, p]^T . W                     then scattered to dx
//   backward weights dW[m, (c, t)] = dy^T[m, r] . rows[r, (c, t)]
//
// with t over the *active* taps only: those that read the image at some output position (per
// spatial dimension, so the active set is a product of index ranges). The GEMMs read W where it
// lives (no reorder) and run through oneDNN's matmul (kernels/cpu/dnnl_matmul.h), fp32
// accumulation and one rounding of each result: bf16 weights and activations multiply natively,
// and the backward data's overlapping taps are summed in fp32 before their one rounding.
// Weight-gradient entries of inactive taps are exactly zero (they multiply only padding).
// Scratch (the gathered rows, dy's transpose or, for the weight gradient, dy copied channel by
// channel, fp32 partial input gradients) is per thread and kept between calls; each buffer is no
// larger than the convolution's weights (the rows: no more output positions than output
// channels), its output or its input, in fp32 at most; the bf16 weight gradient's own rule
// (below) bounds its rows at kWeightGradMaxGathered elements, or one image's rows where
// those are more.
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "kernels/cpu/conv.h"

namespace ampc::kernels::cpu {

// One convolution: x [n, c, image], w [m, c, kernel], y [n, m, cols] (group 1), all of element
// type `type` (f32, or bf16 on a CPU that multiplies it natively).
struct ConvGemm {
  ConvGeom g;
  int64_t n = 0, c = 0, m = 0;
  DType type = DType::kFloat32;
};

// Whether this formulation serves p, and is the faster one: group 1, element type as above,
// and no more output positions (n * cols) than output channels (the weights at least as large as
// the gathered rows).
bool conv_gemm_serves(const ConvGemm& p, int64_t group);

// The weight gradient alone also takes this formulation in bf16 where its GEMM is wide enough
// (c x active taps at least kWeightGradMinWidth) and the gathered rows stay small (at most
// kWeightGradMaxGathered elements): there oneDNN 2.6 computes the bf16 weight gradient in fp32
// after reordering x and dy (its bf16 kernel for it is no faster), and the GEMM is. Measured on
// resnet18 at 32x32 (batch 32, bf16): the ConvGrad steps of the second stage's 3x3 convolutions
// (4x4 maps, 128 channels) take 0.72-0.77 of their time; the first stage's (8x8, 64) the same
// time; its 3-channel convolution (a narrow GEMM over 64 output channels) longer, so it stays
// with oneDNN. (Its 1x1 convolutions to 128 channels and more take the rule below.)
inline constexpr int64_t kWeightGradMinWidth = 512;
inline constexpr int64_t kWeightGradMaxGathered = int64_t{4} << 20;  // 8 MiB of bf16 rows
// With 128 output channels or more (kWeightGradMinOutputs) the GEMM serves however many rows
// there are, where one image's rows fit kWeightGradMaxGathered or the GEMM is wider still (c x
// active taps at least kWeightGradChunkedMinWidth): the images are taken in chunks whose rows
// fit kWeightGradMaxGathered (one image at least), each chunk's product added to fp32 sums of
// the gradient that are rounded once at the end. Measured at batch 32 (standalone, the GEMM
// against oneDNN's bf16 weight gradient, 2 threads): 3x3 windows, 128 channels on 28x28 maps 16
// against 21 ms, 256 on 14x14 13 against 21, 512 on 7x7 14 against 23; 1x1, 1024 -> 256 on
// 14x14 6.6 against 10.3, 512 -> 128 on 28x28 8.6 against 13.4, 32 -> 128 on 28x28 0.8 against
// 1.4; 0.4-0.97 of oneDNN's time over 48 shapes of 1x1 and 3x3 windows on 7x7 to 56x56 maps.
// With 64 output channels the GEMM (64 rows of dy^T) is at half its peak and the gather outweighs
// its gain: 64 on 56x56 under a 3x3 window 31 against 24 ms, 256 -> 64 1.38x oneDNN's time.
// A single active tap (1x1 windows) gathers nothing, its rows being the image transposed, and
// takes the GEMM with any number of output channels: MobileNet's 1x1 convolutions at 32x32
// (16 -> 96 on 16x16, 144 -> 24 on 8x8, 576 -> 96 on 2x2) 0.65-0.92 of oneDNN's time, 64 -> 64
// 0.5-1.01 on 7x7 to 56x56 maps, 256 -> 64 0.62-1.00, 96 -> 24 on 8x8 1.08 the worst measured.
inline constexpr int64_t kWeightGradMinOutputs = 128;
inline constexpr int64_t kWeightGradChunkedMinWidth = 2048;
bool conv_gemm_serves_weight_grad(const ConvGemm& p, int64_t group);

// y = conv(x, w) + bias (bias of p.type, may be null). False when oneDNN refused a GEMM (then the
// caller's fallback overwrites y).
bool conv_gemm_forward(const ConvGemm& p, const void* x, const void* w, const void* bias, void* y);

// dx = the gradient of the convolution with respect to x for dy [n, m, cols].
bool conv_gemm_backward_data(const ConvGemm& p, const void* dy, const void* w, void* dx);

// dw (every element, zeros at inactive taps) and db [m] (may be null).
bool conv_gemm_backward_weights(const ConvGemm& p, const void* dy, const void* x, void* dw,
                                void* db);

}  // namespace ampc::kernels::cpu
