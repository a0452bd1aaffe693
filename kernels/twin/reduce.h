// CPU twin of kernels/cuda/reduce.h (same arguments minus the stream, host pointers; the
// workspace is host memory of reduce_workspace_bytes), in the kernels' partition and order.
// Also the CPU backend's Reduce ops on float data; besides f32, f16 and bf16 it takes f64
// (double accumulation, partials of 8 bytes in the workspace).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"
#include "kernels/shared/workspace_bytes.h"

namespace ampc::kernels::twin {

using shared::ReduceOp;

using shared::reduce_workspace_bytes;

void reduce(ReduceOp op, DType dtype, const void* x, void* y, int rank, const int64_t* dims,
            const bool* reduced, void* workspace);

}  // namespace ampc::kernels::twin
