// Normalisation layers. "Channel" layouts are x [n, c, spatial]. All instantiated for float
// and double. BatchNormalization runs kernels/twin/batchnorm.h (the CUDA kernels' CPU twin).
#pragma once

#include <cstdint>
#include <vector>

namespace ampc::kernels::cpu {

// Local response normalisation across channels:
// y = x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)/2, c + size/2])^beta.
template <typename T>
void lrn(const T* x, int64_t n, int64_t c, int64_t spatial, int64_t size, T alpha, T beta, T bias,
         T* y);

// y = (x - mean) / (sqrt(mean(x^2) - mean^2) + eps), statistics over the flagged axes.
template <typename T>
void mean_variance_norm(const T* x, const std::vector<int64_t>& dims,
                        const std::vector<bool>& reduced, T eps, T* y);

}  // namespace ampc::kernels::cpu
