// Softmax and LogSoftmax on the GPU over the middle axis of x viewed as [outer, n, inner]
// (the CPU op's layout). CPU twin: kernels/twin/softmax.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"

namespace ampc::kernels::cuda {

// y = softmax (or log_softmax) of x along n; x and y have element type `dtype` (f32, f16,
// bf16; 16-bit values computed in fp32 and rounded once). y may alias x. Asynchronous on
// `stream`, no workspace. Throws ampc::Error for other dtypes or a failed launch.
void softmax(DType dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
             bool log_softmax, cudaStream_t stream);

// The backward: dx from y (the forward's output) and dy along n; y and dx of element type
// `dtype`, dy of `dy_dtype`: the same or, with f32 y, f16 / bf16 read widened (kernel_args.h's
// grad_input_fits). Softmax: dx = y * (dy - sum(dy * y)); LogSoftmax: dx = dy - exp(y) * sum(dy);
// in fp32, each dx rounded once, the row's sum in the forward kernels' order
// (kernels/shared/rowwise.h).
void softmax_grad(DType dtype, DType dy_dtype, const void* y, const void* dy, void* dx,
                  int64_t outer, int64_t n, int64_t inner, bool log_softmax, cudaStream_t stream);

}  // namespace ampc::kernels::cuda
