// ReduceSum, ReduceMean, ReduceProd, ReduceMax, ReduceMin, ReduceL1, ReduceL2, ReduceLogSum and
// ReduceSumSquare on the GPU over any set of axes. CPU twin: kernels/twin/reduce.h, which is
// also the CPU backend's op on float data (and takes f64 too, accumulating in double).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"
#include "kernels/shared/workspace_bytes.h"

namespace ampc::kernels::cuda {

using shared::ReduceOp;

// Device workspace that reduce needs for these arguments.
using shared::reduce_workspace_bytes;

// y = the reduction of x (dims[0..rank), contiguous) over the axes with reduced[i] true; y holds
// the kept dimensions in order (keepdims and noop_with_empty_axes are the caller's: an empty
// axis set means reduce nothing here, so resolve "all axes" to all true). x and y: `dtype`
// (f32, f16, bf16; fp32 accumulation, 16-bit results rounded once). rank <= 8.
// Contiguous reduced axes use the [outer, n, inner] kernels, others a general strided kernel.
void reduce(ReduceOp op, DType dtype, const void* x, void* y, int rank, const int64_t* dims,
            const bool* reduced, void* workspace, cudaStream_t stream);

}  // namespace ampc::kernels::cuda
