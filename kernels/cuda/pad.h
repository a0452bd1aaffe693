// Pad on the device (runtime/cpu/ops/tensor_layout.cc's pad_op): constant, edge and reflect
// modes over up to 8 dimensions; pads may be negative (they crop). Asynchronous on `stream`,
// no allocation, capturable. Unsupported cases throw ampc::Error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"

namespace ampc::kernels::cuda {

#define AMPC_KERNEL_STREAM , cudaStream_t stream
#include "kernels/cuda/pad_api.inc"
#undef AMPC_KERNEL_STREAM

}  // namespace ampc::kernels::cuda
