// Negative log-likelihood over class scores, the common core of NegativeLogLikelihoodLoss
// and SoftmaxCrossEntropyLoss.
#pragma once

#include <cstdint>

namespace ampc::kernels::cpu {

enum class LossReduction { kNone, kSum, kMean };

// logp [n, c, d] (log-probabilities), target [n, d], weight [c] or null.
// loss[i, j] = -logp[i, target[i, j], j] * weight[target[i, j]], and 0 where the target
// equals ignore_index (when has_ignore). kNone writes loss [n, d] to out; kSum writes its
// sum; kMean writes the sum divided by the sum of the weights of the non-ignored targets.
// Returns -1, or the flat position in target of the first target outside [0, c) that is
// not ignored (out is then unspecified).
// Instantiated for T in {float, double} and L in {int32_t, int64_t}.
template <typename T, typename L>
int64_t nll_loss(const T* logp, const L* target, int64_t n, int64_t c, int64_t d, const T* weight,
                 bool has_ignore, int64_t ignore_index, LossReduction reduction, T* out);

}  // namespace ampc::kernels::cpu
