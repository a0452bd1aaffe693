// CPU twin of kernels/cuda/gather_scatter.h, which documents every function: the same functions
// with the same arguments minus the stream, on host pointers (what the CUDA header calls device
// memory, workspaces and flags included, is host memory here). They run the kernels'
// per-element functions (kernels/shared) in the kernels' order, sequentially.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"

namespace ampc::kernels::twin {

// out[o, j, i] = data[o, indices[j], i] with data viewed as [outer, axis_dim, inner] and out as
// [outer, num_indices, inner]. Any element type of 1, 2, 4 or 8 bytes.
void gather(DType dtype, const void* data, int64_t outer, int64_t axis_dim, int64_t inner,
            DType index_dtype, const void* indices, int64_t num_indices, void* out,
            int32_t* bad_index);

using shared::ScatterReduction;

// ScatterND: out = data, then for every index tuple t in order (indices [num_tuples, depth]
// address the first `depth` dimensions of data_shape; a slice is the rest of data):
// out[slice(t)] = updates[t] (none) or out[slice(t)] op= updates[t]. Deterministic, and equal to
// the CPU op's sequential order: each output slice folds the updates that address it in
// increasing t (a counting sort of the tuples by destination row in the workspace), so
// repeated indices (the embedding gradient) give the CPU op's result bit for bit. 16-bit data
// with a reduction accumulate in fp32 and round once, as the CPU op does (nn::run_widened).
// Element types: f32, f64, f16, bf16, i32, i64 (none: also bool, u8, i8). out may not alias
// data. workspace: scatter_nd_workspace_bytes(...) bytes of device memory (256-byte aligned).
size_t scatter_nd_workspace_bytes(const std::vector<int64_t>& data_shape, int64_t num_tuples,
                                  int64_t depth);
void scatter_nd(DType dtype, const void* data, const std::vector<int64_t>& data_shape,
                DType index_dtype, const void* indices, int64_t num_tuples, int64_t depth,
                const void* updates, ScatterReduction reduction, void* out, void* workspace,
                int32_t* bad_index);

}  // namespace ampc::kernels::twin
