// CPU twin of kernels/cuda/layernorm.h (same arguments minus the stream, host pointers), in
// the kernel's partition and reduction order (kernels/shared/rowwise_tree.h). It is the CPU
// backend's LayerNormalization too; for the CPU op's f64 every operand is
// f64 (computed in double, no device counterpart).
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/workspace_bytes.h"
#include "kernels/twin/row_loops.h"

namespace ampc::kernels::twin {

void layer_norm(DType x_dtype, const void* x, int64_t rows, int64_t cols, DType param_dtype,
                const void* scale, const void* bias, float epsilon, void* y, DType stat_dtype,
                void* mean, void* inv_std, RowLoops loops = RowLoops::kBest);

// The backward; for the CPU op's f64 every operand is f64 and the workspace holds doubles. dY of
// x's type, or f16 / bf16 read widened where x is f32 (kernel_args.h's grad_input_fits;
// ampc.LayerNormalizationGrad with its dY's Cast folded in); dx of x's type.
using shared::layer_norm_grad_workspace_bytes;
void layer_norm_grad(DType x_dtype, DType dy_dtype, const void* x, const void* dy, int64_t rows,
                     int64_t cols, DType param_dtype, const void* scale, float epsilon, void* dx,
                     void* dscale, void* dbias, void* workspace, RowLoops loops = RowLoops::kBest);

}  // namespace ampc::kernels::twin
