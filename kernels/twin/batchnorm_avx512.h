// AVX-512 forms of batchnorm.cc's loops over f32 and bf16 data (the CPU backend's
// BatchNormalization and its gradient in fp32 and bf16 plans): the statistics' passes, the
// affine map and dX. Each element gets batchnorm_math.h's operations, and each emulated
// thread's accumulator its elements in the kernels' order, so the bits are batchnorm.cc's
// generic loops' (which the build compiles for plain x86-64, where the bf16 conversions and the
// 256 thread accumulators stay scalar). tests/unit/twin_data_test.cc checks them against the
// kernels' order written out with batchnorm_math.h's per-thread functions.
#pragma once

#include <cstdint>

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

}  // namespace ampc::kernels::twin::bn_avx512
