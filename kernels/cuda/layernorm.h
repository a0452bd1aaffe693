// LayerNormalization forward on the GPU: rows of x [rows, cols] (cols = the product of the
// dimensions from `axis` on). CPU twin: kernels/twin/layernorm.h. (InstanceNormalization, the
// same math with a scale and bias per row, is a generic row op: kernels/cuda/row_op.h.)
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/workspace_bytes.h"

namespace ampc::kernels::cuda {

// y = (x - mean) * inv_std * scale + bias per row, inv_std = 1 / sqrt(biased var + epsilon).
// x and y: `x_dtype` (f32, f16, bf16). scale and bias: `param_dtype` (f32, f16, bf16), one
// value per column, `cols` values each (a broadcast scale/bias must be expanded by the caller);
// either may be null (1 and 0). mean and inv_std (null when not wanted): `rows` values of
// `stat_dtype` (the op's stash_type; f32, f16 or bf16). y may alias x. Asynchronous, no workspace.
void layer_norm(DType x_dtype, const void* x, int64_t rows, int64_t cols, DType param_dtype,
                const void* scale, const void* bias, float epsilon, void* y, DType stat_dtype,
                void* mean, void* inv_std, cudaStream_t stream);

// The backward (ampc.LayerNormalizationGrad): the statistics recomputed from x in the
// forward's order, then per row with g = dy * scale
//   dx = (g - mean(g) - xhat * mean(g * xhat)) * inv_std,
// and over the rows dscale = sum(dy * xhat), dbias = sum(dy), in row chunks
// (kernels/shared/rowwise.h's layer_norm_grad_chunk_rows), all in fp32, each output rounded once.
// x and dx: `x_dtype` (f32, f16, bf16); dy: `dy_dtype`, x's or, with f32 x, f16 / bf16 read
// widened (kernel_args.h's grad_input_fits); scale, dscale and dbias: `param_dtype`, `cols`
// values. dx, dscale and dbias may each be null. workspace:
// layer_norm_grad_workspace_bytes(x_dtype, rows, cols). Three launches: the rows (dx, the
// statistics), the chunks' column sums, their total.
using shared::layer_norm_grad_workspace_bytes;
void layer_norm_grad(DType x_dtype, DType dy_dtype, const void* x, const void* dy, int64_t rows,
                     int64_t cols, DType param_dtype, const void* scale, float epsilon, void* dx,
                     void* dscale, void* dbias, void* workspace, cudaStream_t stream);

}  // namespace ampc::kernels::cuda
