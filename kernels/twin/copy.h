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

// dst[dst_offset + sum_d i_d * dst_strides[d]] = src[src_offset + sum_d i_d * src_strides[d]]
// for every index i of `shape`. Any element type with a size of 1, 2, 4 or 8 bytes (bits are
// moved, nothing converted). Strides may be negative (reversed slices) or 0 (broadcast
// reads); destination strides must not make two indices write one element.
void strided_copy(DType dtype, const std::vector<int64_t>& shape, const void* src,
                  int64_t src_offset, const std::vector<int64_t>& src_strides, void* dst,
                  int64_t dst_offset, const std::vector<int64_t>& dst_strides);

// dst[i] = src[i] for i < numel (128-bit loads and stores when the pointers allow).
void contiguous_copy(DType dtype, const void* src, void* dst, int64_t numel);

// Concat along an axis of tensors viewed as [outer, axis_sizes[k], inner]: out is
// [outer, sum(axis_sizes), inner]. One launch per input.
void concat(DType dtype, const std::vector<const void*>& inputs,
            const std::vector<int64_t>& axis_sizes, int64_t outer, int64_t inner, void* out);

// Split, the inverse: in [outer, sum(axis_sizes), inner] -> outputs[k] [outer, axis_sizes[k],
// inner]. One launch per output; null outputs are skipped.
void split(DType dtype, const void* in, int64_t outer, int64_t inner,
           const std::vector<int64_t>& axis_sizes, const std::vector<void*>& outputs);

}  // namespace ampc::kernels::twin
