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
#include "kernels/shared/workspace_bytes.h"

namespace ampc::kernels::twin {

using shared::scatter_nd_workspace_bytes;
using shared::ScatterReduction;

void gather(DType dtype, const void* data, int64_t outer, int64_t axis_dim, int64_t inner,
            DType index_dtype, const void* indices, int64_t num_indices, void* out,
            int32_t* bad_index);

void scatter_nd(DType dtype, const void* data, const std::vector<int64_t>& data_shape,
                DType index_dtype, const void* indices, int64_t num_tuples, int64_t depth,
                const void* updates, ScatterReduction reduction, void* out, void* workspace,
                int32_t* bad_index);

}  // namespace ampc::kernels::twin
