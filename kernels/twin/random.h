// CPU twin of kernels/cuda/random.h (same arguments minus the stream, host pointers: key.run
// points at host memory). Also the CPU backend's RandomUniform, RandomNormal and their *Like
// forms (runtime/cpu/ops/random_ops.cc).
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/dropout_math.h"
#include "kernels/shared/random_math.h"

namespace ampc::kernels::twin {

void random_fill(DType dtype, void* y, int64_t n, shared::RandomDraw draw, shared::DropoutKey key);

}  // namespace ampc::kernels::twin
