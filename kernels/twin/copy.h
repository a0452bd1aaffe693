// CPU twin of kernels/cuda/copy.h, which documents every function: the same functions with
// the same arguments minus the stream, on host pointers (what the CUDA header calls device
// memory, workspaces and flags included, is host memory here). They run the kernels'
// per-element functions (kernels/shared) in the kernels' order, sequentially.
#pragma once

#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"

namespace ampc::kernels::twin {

using shared::kMaxCopyDims;

void strided_copy(DType dtype, const std::vector<int64_t>& shape, const void* src,
                  int64_t src_offset, const std::vector<int64_t>& src_strides, void* dst,
                  int64_t dst_offset, const std::vector<int64_t>& dst_strides);

void contiguous_copy(DType dtype, const void* src, void* dst, int64_t numel);

void concat(DType dtype, const std::vector<const void*>& inputs,
            const std::vector<int64_t>& axis_sizes, int64_t outer, int64_t inner, void* out);

void split(DType dtype, const void* in, int64_t outer, int64_t inner,
           const std::vector<int64_t>& axis_sizes, const std::vector<void*>& outputs);

}  // namespace ampc::kernels::twin
