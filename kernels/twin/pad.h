// CPU twin of kernels/cuda/pad.h, which documents every function: the same functions with
// the same arguments minus the stream, on host pointers (what the CUDA header calls device
// memory, workspaces and flags included, is host memory here). They run the kernels'
// per-element functions (kernels/shared) in the kernels' order, sequentially.
#pragma once

#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"

namespace ampc::kernels::twin {

using shared::kMaxPadDims;
using shared::PadMode;

// out (contiguous, shape in_shape[d] + pads_begin[d] + pads_end[d]) from in (contiguous,
// in_shape). Constant mode fills with *value (a DEVICE pointer to one element of `dtype`, the
// op's constant_value input) or, when value is null, with fill_value converted to dtype as the
// CPU op converts its `value` attribute (0 when neither is given). Any element type of 1, 2, 4
// or 8 bytes. The caller checks what the CPU op checks (non-negative output dims, no edge or
// reflect padding of an empty axis).
void pad(DType dtype, const void* in, const std::vector<int64_t>& in_shape,
         const std::vector<int64_t>& pads_begin, const std::vector<int64_t>& pads_end, PadMode mode,
         const void* value, float fill_value, void* out);

}  // namespace ampc::kernels::twin
