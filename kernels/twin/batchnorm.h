// CPU twin of kernels/cuda/batchnorm.h, which documents every function: the same functions with
// the same arguments minus the stream, on host pointers (what the CUDA header calls device
// memory, workspaces and flags included, is host memory here). They run the kernels'
// per-element functions (kernels/shared) in the kernels' order, sequentially.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/workspace_bytes.h"

namespace ampc::kernels::twin {

using shared::batch_norm_training_workspace_bytes;

void batch_norm_inference(DType x_dtype, DType param_dtype, DType stat_dtype, const void* x,
                          int64_t n, int64_t c, int64_t spatial, const void* scale,
                          const void* bias, const void* mean, const void* var, float epsilon,
                          void* y);

void batch_norm_training(DType x_dtype, DType param_dtype, DType stat_dtype, const void* x,
                         int64_t n, int64_t c, int64_t spatial, const void* scale, const void* bias,
                         const void* mean, const void* var, float epsilon, float momentum, void* y,
                         void* running_mean_out, void* running_var_out, void* saved_mean,
                         void* saved_var, void* workspace);

using shared::batch_norm_grad_workspace_bytes;

void batch_norm_grad(DType x_dtype, DType param_dtype, const void* x, const void* dy, int64_t n,
                     int64_t c, int64_t spatial, const void* scale, float epsilon, void* dx,
                     void* dscale, void* dbias, void* workspace);

}  // namespace ampc::kernels::twin
