// The convolution's bias on the device: y[i, ch, j] += b[ch] over y [n, c, spatial] in place,
// in fp32 with one rounding per element (the CPU backend's Add of 16-bit tensors). y and b:
// f32, f16 or bf16, the same type (cuDNN's cudnnAddTensor does not document bf16).
// Asynchronous, no allocation, capturable. CPU twin: kernels/twin/bias.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"

namespace ampc::kernels::cuda {

void add_channel_bias(DType dtype, void* y, const void* b, int64_t n, int64_t c, int64_t spatial,
                      cudaStream_t stream);

}  // namespace ampc::kernels::cuda
