// CPU twin of kernels/cuda/reduce.h (same arguments minus the stream, host pointers; the
// workspace is host memory of reduce_workspace_bytes), in the kernels' partition and order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"

namespace ampc::kernels::twin {

using shared::ReduceOp;

size_t reduce_workspace_bytes(ReduceOp op, DType dtype, int rank, const int64_t* dims,
                              const bool* reduced);

void reduce(ReduceOp op, DType dtype, const void* x, void* y, int rank, const int64_t* dims,
            const bool* reduced, void* workspace);

}  // namespace ampc::kernels::twin
