// CPU twin of kernels/cuda/dropout.h (same arguments minus the stream, host pointers: key.run
// points at host memory). Also the CPU backend's Dropout (runtime/cpu/ops).
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/dropout_math.h"

namespace ampc::kernels::twin {

void dropout(DType dtype, const void* x, void* y, bool* mask, void* mask_values, int64_t n,
             double ratio, bool training, shared::DropoutKey key);

}  // namespace ampc::kernels::twin
