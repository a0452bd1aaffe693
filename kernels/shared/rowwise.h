// Per-element and per-row math of Softmax / LogSoftmax, LayerNormalization and
// SoftmaxCrossEntropyLoss, shared by the CUDA kernels (kernels/cuda) and their twins
// (kernels/twin, which is also the CPU backend's implementation of these ops), with every
// rounding step spelled out (rowwise_fp.h).
#pragma once

#include <cstdint>

#include "kernels/shared/float_math.h"
#include "kernels/shared/hd.h"
#include "kernels/shared/rowwise_fp.h"
#include "kernels/shared/rowwise_tree.h"

namespace ampc::kernels::shared {

// Row maximum for the softmax shift: which of several NaNs or a NaN vs a number wins does not
// matter, every output of such a row is NaN (exp(NaN) or inf - inf), as in the CPU op.
struct MaxCombine {
  AMPC_HD float operator()(float a, float b) const { return b > a ? b : a; }
};
struct SumCombine {
  AMPC_HD float operator()(float a, float b) const { return add(a, b); }
};
struct DoubleSumCombine {
  AMPC_HD double operator()(double a, double b) const { return add(a, b); }
};

constexpr float kNegInf = -__builtin_huge_valf();

// exp(x - m), the softmax numerator, summed for the denominator.
AMPC_HD float exp_shifted(float x, float m) {
  return fmath::exp_f32(sub(x, m));
}
AMPC_HD float softmax_value(float x, float m, float inv_sum) {
  return mul(exp_shifted(x, m), inv_sum);
}
// (x - m) - log(sum): m + log(sum) first would lose the low bits of large inputs.
AMPC_HD float log_softmax_value(float x, float m, float log_sum) {
  return sub(sub(x, m), log_sum);
}
AMPC_HD float softmax_inv_sum(float sum) {
  return div(1.0f, sum);
}

// The backward of Softmax (y = softmax(x)) and LogSoftmax (y = log_softmax(x)) along a row,
// given dy: the row's sum s, then each element. M is the compute type as for LayerNorm.
// Softmax: s = sum(dy * y), dx = y * (dy - s).
template <typename M>
AMPC_HD M softmax_grad_term(M dy, M y) {
  return mul(dy, y);
}
template <typename M>
AMPC_HD M softmax_grad_value(M dy, M y, M s) {
  return mul(y, sub(dy, s));
}
// LogSoftmax: s = sum(dy), dx = dy - exp(y) * s; `e` is exp(y) (fmath::exp_f32 for float).
template <typename M>
AMPC_HD M log_softmax_grad_value(M dy, M e, M s) {
  return sub(dy, mul(e, s));
}

// LayerNormalization: two passes (mean, then the biased variance around it). M is the compute
// type: float on the device and for f32 / f16 / bf16 on the host, double for the CPU op's f64.
template <typename M>
AMPC_HD M mean_of(M sum, int64_t n) {
  return n ? div(sum, static_cast<M>(n)) : M(0);
}
template <typename M>
AMPC_HD M add_sq_dev(M acc, M x, M mean) {
  const M d = sub(x, mean);
  return add(acc, mul(d, d));
}
template <typename M>
AMPC_HD M inv_std_of(M sq_dev_sum, int64_t n, M eps) {
  const M var = n ? div(sq_dev_sum, static_cast<M>(n)) : M(0);
  return div(M(1), sqrt_rn(add(var, eps)));
}
// The normalised value, (x - mean) * inv_std: the forward's and the backward's.
template <typename M>
AMPC_HD M layer_norm_xhat(M x, M mean, M inv_std) {
  return mul(sub(x, mean), inv_std);
}
// The CPU op's three branches: scale and bias, scale only, neither (plus bias when present).
template <typename M>
AMPC_HD M layer_norm_value(M x, M mean, M inv_std, const M* scale, const M* bias) {
  const M t = layer_norm_xhat(x, mean, inv_std);
  if (scale) return bias ? add(mul(t, *scale), *bias) : mul(t, *scale);
  return add(t, bias ? *bias : M(0));
}

// LayerNormalization's backward (ampc.LayerNormalizationGrad), per row with g = dY * scale:
// dX = (g - mean(g) - xhat * mean(g * xhat)) * inv_std, the two means from the row's sums
// (folded in the block's order, as the forward's statistics).
template <typename M>
AMPC_HD M layer_norm_grad_value(M g, M xhat, M mean_g, M mean_gxhat, M inv_std) {
  return mul(sub(sub(g, mean_g), mul(xhat, mean_gxhat)), inv_std);
}
// dScale = sum(dY * xhat) and dB = sum(dY) over the rows: each chunk of
// layer_norm_grad_chunk_rows(rows) consecutive rows folded in row order from 0 (one thread per
// column on the device), then the chunks' sums folded in chunk order from 0. The chunking
// depends on the row count alone, so the device and the host add in the same order whatever
// their thread counts; at most kLayerNormGradChunks chunks bound the partial sums' workspace.
constexpr int64_t kLayerNormGradChunks = 256;
constexpr int64_t kLayerNormGradMinChunkRows = 16;
AMPC_HD int64_t layer_norm_grad_chunk_rows(int64_t rows) {
  const int64_t r = ceil_div(rows, kLayerNormGradChunks);
  return r > kLayerNormGradMinChunkRows ? r : kLayerNormGradMinChunkRows;
}
AMPC_HD int64_t layer_norm_grad_chunks(int64_t rows) {
  return ceil_div(rows, layer_norm_grad_chunk_rows(rows));
}
// Its workspace (values of `value_bytes`: fp32, fp64 for the CPU op's f64): each row's mean and
// inverse deviation (2 per row), then per chunk the column sums of dY * xhat and of dY (2 * cols
// per chunk), 256-byte aligned.
struct LayerNormGradLayout {
  int64_t partials_offset, bytes;
};
AMPC_HD LayerNormGradLayout layer_norm_grad_layout(int64_t rows, int64_t cols,
                                                   int64_t value_bytes) {
  const int64_t stats = ceil_div(2 * rows * value_bytes, 256) * 256;
  return {stats, stats + 2 * layer_norm_grad_chunks(rows) * cols * value_bytes};
}

// SoftmaxCrossEntropyLoss at one position: -log_prob[label] * weight[label]. An ignored position
// contributes loss 0 and weight 0 to the mean's denominator; an invalid label gives NaN.
AMPC_HD float nll_value(float log_prob, float weight) {
  return mul(-log_prob, weight);
}
AMPC_HD float quiet_nan() {
  return from_bits(0x7fc00000u);
}
// 0: counts, 1: ignored, 2: invalid (outside [0, c)).
AMPC_HD int label_status(int64_t label, int64_t c, bool has_ignore, int64_t ignore_index) {
  if (has_ignore && label == ignore_index) return 1;
  return label < 0 || label >= c ? 2 : 0;
}

}  // namespace ampc::kernels::shared
