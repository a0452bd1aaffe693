// BatchNormalization on the device with the CPU op's semantics (runtime/cpu/ops/nn_norm.cc):
// x [n, c, spatial]; scale, bias, mean, var [c]. x may be f32, f16, bf16 or f64; the
// parameters and statistics have their own dtypes (fp32 with 16-bit x under autocast). The
// math runs in fp32 (f64 when x is f64) and rounds once per stored value. Asynchronous, no
// allocation, capturable. Unsupported cases throw ampc::Error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/workspace_bytes.h"

namespace ampc::kernels::cuda {

// Inference: y = scale * (x - mean) / sqrt(var + epsilon) + bias, folded as the CPU op folds
// it (a = scale / sqrt(var + eps), b = bias - mean * a, y = a * x + b). param_dtype is the
// dtype of scale and bias, stat_dtype that of mean and var.
void batch_norm_inference(DType x_dtype, DType param_dtype, DType stat_dtype, const void* x,
                          int64_t n, int64_t c, int64_t spatial, const void* scale,
                          const void* bias, const void* mean, const void* var, float epsilon,
                          void* y, cudaStream_t stream);

// Training: batch mean and biased variance per channel (a deterministic block reduction:
// batch_norm_stat_splits(...) partial sums per channel, each a fixed tree, combined in order;
// the CPU twin reproduces the order), y normalised with them, and the outputs the CPU op
// writes, each may be null: running_mean_out = mean * momentum + batch_mean * (1 - momentum),
// running_var_out likewise with the biased batch variance, saved_mean / saved_var = the batch
// statistics (opset < 14). All four have stat_dtype. workspace: device memory of
// batch_norm_training_workspace_bytes(n, c, spatial) bytes (256-byte aligned).
using shared::batch_norm_training_workspace_bytes;
void batch_norm_training(DType x_dtype, DType param_dtype, DType stat_dtype, const void* x,
                         int64_t n, int64_t c, int64_t spatial, const void* scale, const void* bias,
                         const void* mean, const void* var, float epsilon, float momentum, void* y,
                         void* running_mean_out, void* running_var_out, void* saved_mean,
                         void* saved_var, void* workspace, cudaStream_t stream);

// Backward of training mode (ampc.BatchNormalizationGrad): the batch statistics recomputed
// from x as batch_norm_training computes them, then per channel dbias = sum(dy), dscale =
// sum(dy * (x - mean)) * inv_std, and dx = (dy - dbias / count - xhat * dscale / count) *
// scale * inv_std (batchnorm_math.h's order). dy has x's dtype, dscale and dbias param_dtype;
// dx, dscale and dbias may each be null. workspace: batch_norm_grad_workspace_bytes(n, c,
// spatial) bytes of device memory.
using shared::batch_norm_grad_workspace_bytes;
void batch_norm_grad(DType x_dtype, DType param_dtype, const void* x, const void* dy, int64_t n,
                     int64_t c, int64_t spatial, const void* scale, float epsilon, void* dx,
                     void* dscale, void* dbias, void* workspace, cudaStream_t stream);

}  // namespace ampc::kernels::cuda
