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

using shared::BinaryOp;
using shared::kMaxElementwiseDims;

// out (out_shape, contiguous) = a op b, a and b broadcast to out_shape (numpy rules; lower
// ranks align to the right). dtype is the element type of a and b: i32, i64, i8, u8 for the
// arithmetic and order comparisons, also bool for Equal, bool only for And / Or / Xor.
void binary(BinaryOp op, DType dtype, const void* a, const std::vector<int64_t>& a_shape,
            const void* b, const std::vector<int64_t>& b_shape, void* out,
            const std::vector<int64_t>& out_shape, cudaStream_t stream);

// out = cond ? x : y with broadcasting; cond is bool; x, y, out any element type of 1, 2, 4 or
// 8 bytes (bits are moved).
void where(DType dtype, const bool* cond, const std::vector<int64_t>& cond_shape, const void* x,
           const std::vector<int64_t>& x_shape, const void* y, const std::vector<int64_t>& y_shape,
           void* out, const std::vector<int64_t>& out_shape, cudaStream_t stream);

// out[i] = !in[i] over bool.
void logical_not(const bool* in, bool* out, int64_t numel, cudaStream_t stream);

// out[i] = Cast(in[i]) for from, to in {bool, i32, i64, f16, bf16, f32, f64}: 16-bit floats
// load exactly and round once to nearest even (f64 -> 16-bit without double rounding);
// integers -> 16-bit go through fp32 first, as the CPU op; -> bool is != 0; float -> integer
// truncates towards zero, and a value outside the integer's range (or NaN) gives the integer
// minimum, which is what the CPU op computes on x86-64 (cvttss2si; C++ leaves it undefined).
void cast(DType from, DType to, const void* in, void* out, int64_t numel, cudaStream_t stream);

}  // namespace ampc::kernels::cuda
