// Gradients of max and average pooling (pool.h) given dy [planes, cols]: dx [planes, image].
#pragma once

#include <cstdint>

#include "kernels/cpu/conv.h"

namespace ampc::kernels::cpu {

// Each dy goes to the first maximum of its window in x (as max_pool's indices name it).
// float and double.
template <typename T>
void max_pool_grad(const ConvGeom& g, const T* x, const T* dy, int64_t planes, T* dx);

// Each dy is spread evenly over its window's taps, divided by avg_pool's divisor.
// float and double.
template <typename T>
void avg_pool_grad(const ConvGeom& g, const T* dy, int64_t planes, T* dx, bool count_include_pad);

}  // namespace ampc::kernels::cpu
