// The generic row-wise ops (kernels/shared/row_ops.h) on the GPU, over the middle axis of x
// viewed as [outer, n, inner]. CPU twin: kernels/twin/row_op.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/row_ops.h"

namespace ampc::kernels::cuda {

// y = op of x along n; x and y have element type `dtype` (f32, f16, bf16; 16-bit values
// computed in fp32 and rounded once); the op's per-channel operands (device pointers) f32,
// f16 or bf16. y may alias x. Asynchronous on `stream`, no workspace. Throws ampc::Error for
// other dtypes, an op outside the list or a failed launch.
void row_op(shared::RowOp op, DType dtype, const void* x, void* y, int64_t outer, int64_t n,
            int64_t inner, const shared::RowArgs& args, const shared::RowOperands& operands,
            cudaStream_t stream);

}  // namespace ampc::kernels::cuda
