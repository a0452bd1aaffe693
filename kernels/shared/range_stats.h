// The per-element math of ampc.RangeStats (passes/range_stats.h), shared by the CPU operator
// (runtime/cpu/ops/range_stats_op.cc), the CUDA kernel (kernels/cuda/range_stats.cu) and its
// CPU twin (kernels/twin/range_stats.cc): how one value is classified against fp16's range
// and which binary-exponent bin it falls in. Every statistic is a count, a maximum or a
// minimum, so the result does not depend on the order in which elements are visited.
//
// The result is kSize doubles (layout below); counts are exact up to 2^53 elements.
#pragma once

#include <cstdint>

#include "base/half.h"
#include "kernels/shared/hd.h"
#include "kernels/shared/rowwise_fp.h"

namespace ampc::kernels::range_stats {

// fp16's thresholds: below 2^-24 a value flushes to zero, below 2^-14 it is subnormal, above
// 65504 (the largest finite fp16) it overflows.
inline constexpr float kFlushBelow = 5.9604644775390625e-08f;  // 2^-24
inline constexpr float kNormalFrom = 6.103515625e-05f;         // 2^-14
inline constexpr float kFp16Max = 65504.0f;

// Classes of one value (of |x|).
enum Class : int { kZero = 0, kFlush, kSubnormal, kNormal, kOverflow, kNonFinite, kClasses };

// Layout of the result (doubles).
inline constexpr int kNumel = 0;          // elements
inline constexpr int kMaxAbs = 1;         // largest finite |x| (0 when none)
inline constexpr int kMinNonzeroAbs = 2;  // smallest non-zero finite |x| (0 when none)
inline constexpr int kScale = 3;          // the loss scale the scaled classes used
inline constexpr int kTrueClass = 4;      // kClasses counts of the value itself
inline constexpr int kScaledClass = kTrueClass + kClasses;  // kClasses counts of value * scale
// 256 counts: non-zero finite |x| by the biased exponent field of its fp32 encoding
// (bin e holds [2^(e-127), 2^(e-126)) for e >= 1; bin 0 holds fp32 subnormals).
inline constexpr int kHist = kScaledClass + kClasses;
inline constexpr int kHistBins = 256;
inline constexpr int kSize = kHist + kHistBins;

// IEEE binary16 and bfloat16 bits to fp32 (exact): rowwise_fp.h's conversions.
AMPC_HD float fp16_bits_to_float(uint16_t h) {
  return shared::load_half(Half{h});
}

AMPC_HD float bf16_bits_to_float(uint16_t b) {
  return shared::load_bf16(BFloat16{b});
}

// The class of |x| (a = |x|, non-negative or NaN).
AMPC_HD int classify(float a) {
  if (!(a <= 3.402823466e+38f)) return kNonFinite;  // inf or NaN
  if (a == 0.0f) return kZero;
  if (a < kFlushBelow) return kFlush;
  if (a < kNormalFrom) return kSubnormal;
  if (a > kFp16Max) return kOverflow;
  return kNormal;
}

// What one element contributes: its classes unscaled and at `scale` (the product taken in
// fp32, as the scaled gradient is), its exponent bin (-1: zero or not finite) and |x|.
struct ElementBins {
  int true_class;
  int scaled_class;
  int bin;
  float abs;
};

AMPC_HD ElementBins bin_element(float x, float scale) {
  ElementBins e;
  e.abs = x < 0.0f ? -x : x;
  e.true_class = classify(e.abs);
  const float s = e.abs * scale;
  e.scaled_class = classify(s);
  e.bin = (e.true_class == kZero || e.true_class == kNonFinite)
              ? -1
              : static_cast<int>((shared::to_bits(e.abs) >> 23) & 0xffu);
  return e;
}

// The biased exponent bin as an unbiased exponent: values of bin e are in [2^x, 2^(x+1))
// with x = e - 127 (bin 0: below 2^-126).
AMPC_HD int bin_exponent(int bin) {
  return bin == 0 ? -127 : bin - 127;
}

// The GPU kernel's launch shape and device workspace, which its CPU twin reproduces: a
// grid-stride loop of kBlocks(n) blocks of kThreads threads; each block counts in shared
// memory and adds its counts to the workspace (kWorkCounters 64-bit counters: true classes,
// scaled classes, histogram; then the largest |x| and the bitwise complement of the smallest
// non-zero |x| as 32-bit patterns, so that both are atomicMax and 0 means "none").
inline constexpr int kThreads = 256;
inline constexpr int kMaxBlocks = 1024;
AMPC_HD int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}
inline constexpr int kWorkCounters = 2 * kClasses + kHistBins;
inline constexpr int kWorkBytes = kWorkCounters * 8 + 2 * 4;

// The result from the workspace (64-bit counters `c`, patterns `max_bits`, `inv_min_bits`).
AMPC_HD void finish(const unsigned long long* c, uint32_t max_bits, uint32_t inv_min_bits,
                    int64_t n, float scale, double* out) {
  out[kNumel] = static_cast<double>(n);
  out[kMaxAbs] = shared::from_bits(max_bits);
  out[kMinNonzeroAbs] = inv_min_bits == 0 ? 0.0 : shared::from_bits(~inv_min_bits);
  out[kScale] = scale;
  for (int k = 0; k < 2 * kClasses; ++k) out[kTrueClass + k] = static_cast<double>(c[k]);
  for (int b = 0; b < kHistBins; ++b) out[kHist + b] = static_cast<double>(c[2 * kClasses + b]);
}

}  // namespace ampc::kernels::range_stats
