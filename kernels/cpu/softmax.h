// Softmax, log-softmax and hardmax along the middle axis of x viewed as [outer, n, inner].
#pragma once

#include <cstdint>

namespace ampc::kernels::cpu {

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

// y may alias x. Hardmax marks the first maximum with 1. Instantiated for float and double.
template <typename T>
void softmax(SoftmaxKind kind, const T* x, int64_t outer, int64_t n, int64_t inner, T* y);

}  // namespace ampc::kernels::cpu
