// CPU twin of kernels/cuda/batchnorm.h, which documents every function: the same functions with
// the same arguments minus the stream, on host pointers (what the CUDA header calls device
// memory, workspaces and flags included, is host memory here). They run the kernels'
// per-element functions (kernels/shared) in the kernels' order, sequentially.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"

namespace ampc::kernels::twin {

// Inference: y = scale * (x - mean) / sqrt(var + epsilon) + bias, folded as the CPU op folds
// it (a = scale / sqrt(var + eps), b = bias - mean * a, y = a * x + b). param_dtype is the
// dtype of scale and bias, stat_dtype that of mean and var.
void batch_norm_inference(DType x_dtype, DType param_dtype, DType stat_dtype, const void* x,
                          int64_t n, int64_t c, int64_t spatial, const void* scale,
                          const void* bias, const void* mean, const void* var, float epsilon,
                          void* y);

// Training: batch mean and biased variance per channel (a deterministic block reduction:
// batch_norm_stat_splits(...) partial sums per channel, each a fixed tree, combined in order;
// the CPU twin reproduces the order), y normalised with them, and the outputs the CPU op
// writes, each may be null: running_mean_out = mean * momentum + batch_mean * (1 - momentum),
// running_var_out likewise with the biased batch variance, saved_mean / saved_var = the batch
// statistics (opset < 14). All four have stat_dtype. workspace: device memory of
// batch_norm_training_workspace_bytes(n, c, spatial) bytes (256-byte aligned).
size_t batch_norm_training_workspace_bytes(int64_t n, int64_t c, int64_t spatial);
void batch_norm_training(DType x_dtype, DType param_dtype, DType stat_dtype, const void* x,
                         int64_t n, int64_t c, int64_t spatial, const void* scale, const void* bias,
                         const void* mean, const void* var, float epsilon, float momentum, void* y,
                         void* running_mean_out, void* running_var_out, void* saved_mean,
                         void* saved_var, void* workspace);

}  // namespace ampc::kernels::twin
