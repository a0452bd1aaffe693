// CPU twin of kernels/cuda/pad.h: the declarations of kernels/cuda/pad_api.inc, which
// documents every function, without the stream, on host pointers (what the CUDA header calls
// device memory, workspaces and flags included, is host memory here). They run the kernels'
// per-element functions (kernels/shared) in the kernels' order, sequentially.
#pragma once

#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"

namespace ampc::kernels::twin {

#define AMPC_KERNEL_STREAM
#include "kernels/cuda/pad_api.inc"
#undef AMPC_KERNEL_STREAM

}  // namespace ampc::kernels::twin
