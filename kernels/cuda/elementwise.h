// Elementwise ops with numpy broadcasting for the element types the LLVM code generator does
// not handle (integers and bool), and Cast between every pair of {bool, i32, i64, f16, bf16,
// f32, f64}, with the CPU ops' semantics (runtime/cpu/ops/elementwise_*.cc). Shapes are host
// values; broadcasting is resolved into strides and travels by value (up to 8 dimensions after
// merging). Asynchronous, no allocation, capturable. Unsupported cases throw ampc::Error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"

namespace ampc::kernels::cuda {

#define AMPC_KERNEL_STREAM , cudaStream_t stream
#include "kernels/cuda/elementwise_api.inc"
#undef AMPC_KERNEL_STREAM

}  // namespace ampc::kernels::cuda
