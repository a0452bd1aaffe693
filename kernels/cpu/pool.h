// LpPool over up to three spatial dimensions, one plane (one (n, c) pair) at a time:
// x [planes, image] -> y [planes, cols], with the window geometry of ConvGeom. MaxPool,
// AveragePool and the pooling gradients run kernels/twin/pool.h (the CUDA kernels' CPU twin);
// LpPool has no CUDA kernel, so it stays here.
#pragma once

#include <cstdint>

#include "kernels/cpu/conv.h"

namespace ampc::kernels::cpu {

// (sum over the window of |x|^p)^(1/p). float and double.
template <typename T>
void lp_pool(const ConvGeom& g, const T* x, int64_t planes, T* y, int64_t p);

}  // namespace ampc::kernels::cpu
