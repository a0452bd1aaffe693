// Data movement on the device: one generic strided copy (Transpose, Slice with any steps,
// Expand, Tile, view materialisation), a contiguous copy, a fill, and Concat / Split built on it.
// All launches are asynchronous on `stream`, allocate nothing and never synchronise, so they
// may be captured in a CUDA Graph. Shapes and strides are host values (in elements); they
// travel to the kernel by value. Unsupported cases throw ampc::Error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"

namespace ampc::kernels::cuda {

using shared::kMaxCopyDims;

// dst[dst_offset + sum_d i_d * dst_strides[d]] = src[src_offset + sum_d i_d * src_strides[d]]
// for every index i of `shape`. Any element type with a size of 1, 2, 4 or 8 bytes (bits are
// moved, nothing converted). Strides may be negative (reversed slices) or 0 (broadcast
// reads); destination strides must not make two indices write one element.
void strided_copy(DType dtype, const std::vector<int64_t>& shape, const void* src,
                  int64_t src_offset, const std::vector<int64_t>& src_strides, void* dst,
                  int64_t dst_offset, const std::vector<int64_t>& dst_strides, cudaStream_t stream);

// dst[i] = src[i] for i < numel (128-bit loads and stores when the pointers allow).
void contiguous_copy(DType dtype, const void* src, void* dst, int64_t numel, cudaStream_t stream);

// dst[i] = the element whose bytes `value` holds (host memory, read at the call: the launch
// carries it by value) for i < numel (ConstantOfShape).
void fill(DType dtype, const void* value, void* dst, int64_t numel, cudaStream_t stream);

// Concat along an axis of tensors viewed as [outer, axis_sizes[k], inner]: out is
// [outer, sum(axis_sizes), inner]. One launch per input.
void concat(DType dtype, const std::vector<const void*>& inputs,
            const std::vector<int64_t>& axis_sizes, int64_t outer, int64_t inner, void* out,
            cudaStream_t stream);

// Split, the inverse: in [outer, sum(axis_sizes), inner] -> outputs[k] [outer, axis_sizes[k],
// inner]. One launch per output; null outputs are skipped.
void split(DType dtype, const void* in, int64_t outer, int64_t inner,
           const std::vector<int64_t>& axis_sizes, const std::vector<void*>& outputs,
           cudaStream_t stream);

}  // namespace ampc::kernels::cuda
