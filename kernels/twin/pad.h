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

void pad(DType dtype, const void* in, const std::vector<int64_t>& in_shape,
         const std::vector<int64_t>& pads_begin, const std::vector<int64_t>& pads_end, PadMode mode,
         const void* value, float fill_value, void* out);

}  // namespace ampc::kernels::twin
