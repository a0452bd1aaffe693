// AVX-512 forms of batchnorm.cc's loops over f32 and bf16 data (the CPU backend's
// BatchNormalization and its gradient in fp32 and bf16 plans): the statistics' passes, the
// affine map and dX. Each element gets batchnorm_math.h's operations, and each emulated
// thread's accumulator its elements in the kernels' order, so the bits are batchnorm.cc's
// generic loops' (which the build compiles for plain x86-64, where the bf16 conversions and the
// 256 thread accumulators stay scalar). tests/unit/twin_data_test.cc checks them against the
// kernels' order written out with batchnorm_math.h's per-thread functions.
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/shared/batchnorm_math.h"

namespace ampc::kernels::twin::bn_avx512 {

// Whether the CPU runs these (AVX512F, BW and VL); elsewhere batchnorm.cc's loops run.
bool available();

// What the second statistics pass sums per element, given its channel's mean m: (x - m)^2
// (bn::thread_sq_dev; the forward), or (x - m)^2, dy and dy * (x - m) (bn::thread_grad_sums;
// the backward). (kSum, the first pass's x, is internal.)
enum class Sums { kSum, kSqDev, kGrad };

// Both statistics passes over x and dy ([n, c, spatial], f32 or (`bf16`) bf16 bits; dy read
// for kGrad only): part_sum[ch * splits + s] = chunk s of channel ch's sum of x, then with
// each channel's mean m = bn::combine_mean of its chunks, parts[k][ch * splits + s] = the
// chunk's k-th total of `second` (k < 3 for kGrad, k = 0 for kSqDev). Each total is the
// block's: thread t takes elements t, t + kThreads, ... of the chunk in order, then the tree
// v[t] += v[t + s], s = kThreads / 2 .. 1. n * c * spatial > 0.
void statistics(Sums second, bool bf16, const void* x, const void* dy, int64_t n, int64_t c,
                int64_t spatial, int64_t splits, float* part_sum, float* const parts[3]);

// y = bn::affine(a[ch], b[ch], x), rounded once to y's type (x's).
void affine(bool bf16, const void* x, int64_t n, int64_t c, int64_t spatial, const float* a,
            const float* b, void* y);

// dx = bn::grad_dx(g[ch], x, dy), rounded once to dx's type (x's).
void grad_dx(bool bf16, const void* x, const void* dy, int64_t n, int64_t c, int64_t spatial,
             const shared::bn::GradCoefficients<float>* g, void* dx);

// Whether forward_by_channel (backward false) or backward_by_channel serves a shape: maps of at
// least 16 positions, at least 8 channels, and a channel's x (and dy) within 512 KiB, so that
// its values stay in a core's cache from one pass to the next; the forward only with several
// chunks per channel (with one, statistics already runs both passes a channel at a time, and
// its planes of y by channel measured slower: mobilenet_v2's 144-channel 8x8 BatchNorms 1.1x).
bool by_channel(int64_t n, int64_t c, int64_t spatial, int64_t splits, bool bf16, bool backward);

// The training forward by channel, with statistics' and affine's bits: for each channel its
// chunks' sums (part_sum[ch * splits + s]), its mean, their squared deviations (part_sq), then
// finish(ch), which sets a[ch] and b[ch], then the channel's planes of y. x is read from memory
// once where statistics and then affine read it three times (a memory-bound layer: the
// forward's BatchNorm steps of 32 and 96 channels over 16x16 maps in mobilenet_v2 at 32x32,
// batch 32, fp32, 0.70-0.90 of their time). Each task takes a group of channels, prefetched
// image by image (their planes are contiguous there) before the passes read them channel by
// channel.
void forward_by_channel(bool bf16, const void* x, int64_t n, int64_t c, int64_t spatial,
                        int64_t splits, float* part_sum, float* part_sq,
                        const std::function<void(int64_t)>& finish, const float* a, const float* b,
                        void* y);

// The backward likewise, with statistics' (kGrad) and grad_dx's bits: the channel's sums, its
// gradient sums (parts), finish(ch), which sets g[ch], then its planes of dx (none if null).
// x and dy are read from memory once, not twice (mobilenet_v2 as above: its BatchNorm gradient
// steps at 0.6-0.8 of their time, 6.5 -> 5.6 ms a step in fp32, 5.5 -> 4.7 ms in bf16).
void backward_by_channel(bool bf16, const void* x, const void* dy, int64_t n, int64_t c,
                         int64_t spatial, int64_t splits, float* part_sum, float* const parts[3],
                         const std::function<void(int64_t)>& finish,
                         const shared::bn::GradCoefficients<float>* g, void* dx);

}  // namespace ampc::kernels::twin::bn_avx512
