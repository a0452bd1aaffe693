// Gather (any axis) and ScatterND (reduction none / add / mul / max / min) on the device,
// with the CPU ops' semantics (runtime/cpu/ops/tensor_indexing.cc). Indices are int32 or int64
// and stay on the device: negative ones count from the end as in the CPU op; an index outside
// [-dim, dim), which the CPU op rejects, is clamped into [0, dim) and, when bad_index is not
// null, sets *bad_index (a device int32) to 1 so that the runtime can report it later without
// a synchronisation. Asynchronous, no allocation, capturable.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"
#include "kernels/shared/workspace_bytes.h"

namespace ampc::kernels::cuda {

// out[o, j, i] = data[o, indices[j], i] with data viewed as [outer, axis_dim, inner] and out as
// [outer, num_indices, inner]. Any element type of 1, 2, 4 or 8 bytes.
void gather(DType dtype, const void* data, int64_t outer, int64_t axis_dim, int64_t inner,
            DType index_dtype, const void* indices, int64_t num_indices, void* out,
            int32_t* bad_index, cudaStream_t stream);

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
using shared::scatter_nd_workspace_bytes;
void scatter_nd(DType dtype, const void* data, const std::vector<int64_t>& data_shape,
                DType index_dtype, const void* indices, int64_t num_tuples, int64_t depth,
                const void* updates, ScatterReduction reduction, void* out, void* workspace,
                int32_t* bad_index, cudaStream_t stream);

}  // namespace ampc::kernels::cuda
