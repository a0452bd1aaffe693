// CPU twin of kernels/cuda/row_op.h (the generic row-wise ops of kernels/shared/row_ops.h): the
// same arguments minus the stream, host pointers, in the kernel's partition and reduction order,
// so that on a GPU machine the kernel and the twin agree bit for bit. It is the CPU backend's
// implementation of those ops too (plus f64, computed in double).
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/row_ops.h"

namespace ampc::kernels::twin {

// y = op over the middle axis of x viewed as [outer, n, inner] (f32, f64, f16, bf16; 16-bit
// values computed in fp32 and rounded once), with the op's per-channel operands (f32, f16 or
// bf16; f64 for an f64 x). y may alias x. Throws ampc::Error for other dtypes.
void row_op(shared::RowOp op, DType dtype, const void* x, void* y, int64_t outer, int64_t n,
            int64_t inner, const shared::RowArgs& args, const shared::RowOperands& operands = {});

}  // namespace ampc::kernels::twin
