// CPU twin of kernels/cuda/elementwise.h, which documents every function: the same functions with
// the same arguments minus the stream, on host pointers (what the CUDA header calls device
// memory, workspaces and flags included, is host memory here). They run the kernels'
// per-element functions (kernels/shared) in the kernels' order, sequentially.
#pragma once

#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"

namespace ampc::kernels::twin {

using shared::BinaryOp;
using shared::kMaxElementwiseDims;

void binary(BinaryOp op, DType dtype, const void* a, const std::vector<int64_t>& a_shape,
            const void* b, const std::vector<int64_t>& b_shape, void* out,
            const std::vector<int64_t>& out_shape);

void where(DType dtype, const bool* cond, const std::vector<int64_t>& cond_shape, const void* x,
           const std::vector<int64_t>& x_shape, const void* y, const std::vector<int64_t>& y_shape,
           void* out, const std::vector<int64_t>& out_shape);

void logical_not(const bool* in, bool* out, int64_t numel);

void cast(DType from, DType to, const void* in, void* out, int64_t numel);

}  // namespace ampc::kernels::twin
