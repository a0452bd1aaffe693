// Gradients of the convolution y[n, m, cols] = conv(x[n, c, image], w[m, c / group, kernel])
// + bias[m] (see conv.h for the geometry) given dy[n, m, cols].
#pragma once

#include <cstdint>

#include "kernels/cpu/conv.h"

namespace ampc::kernels::cpu {

// dx[n, c, image], dw[m, c / group, kernel] and db[m]; each may be null (not computed).
// Instantiated for float and double.
template <typename T>
void conv_grad(const ConvGeom& g, const T* dy, const T* x, const T* w, T* dx, T* dw, T* db,
               int64_t n, int64_t c, int64_t m, int64_t group);

}  // namespace ampc::kernels::cpu
