// The workspace queries of the launch API: pure host functions of the arguments, the same for a
// CUDA kernel (device memory) and its CPU twin (host memory), so they are defined once here
// (workspace_bytes.cc, library ampc_kernel_workspace) and brought into ampc::kernels::cuda and
// ampc::kernels::twin with using-declarations, as kernel_args.h's types are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"

namespace ampc::kernels::shared {

// cross_entropy.h: a loss and a weight (fp32) per position for kSum / kMean, 0 for kNone.
size_t softmax_cross_entropy_workspace_bytes(int64_t n, int64_t c, int64_t d,
                                             CeReduction reduction);

// reduce.h: partials of the accumulator type (fp32; fp64 for f64) when the reduced rows or
// columns are split (reduce_math.h's plans).
// Throws for a rank above 8.
size_t reduce_workspace_bytes(ReduceOp op, DType dtype, int rank, const int64_t* dims,
                              const bool* reduced);

// gather_scatter.h: ScatterND's counting sort, 3 int32 per row and 3 per tuple (256-byte
// aligned arrays).
size_t scatter_nd_workspace_bytes(const std::vector<int64_t>& data_shape, int64_t num_tuples,
                                  int64_t depth);

// batchnorm.h: the statistics' chunk sums and the folded affine map (256-byte aligned).
size_t batch_norm_training_workspace_bytes(int64_t n, int64_t c, int64_t spatial);
// batchnorm.h's backward: those sums, the chunks' gradient sums and dx's coefficients.
size_t batch_norm_grad_workspace_bytes(int64_t n, int64_t c, int64_t spatial);

// layernorm.h's backward: each row's statistics and each row chunk's column sums (fp32; fp64
// for an f64 input).
size_t layer_norm_grad_workspace_bytes(DType x_dtype, int64_t rows, int64_t cols);

// amp.h: clip_grad_norm's chunk sums and per-tensor norms (double), then the coefficient.
size_t clip_grad_norm_workspace_bytes(int64_t num_tensors, const int64_t* numels);

}  // namespace ampc::kernels::shared
