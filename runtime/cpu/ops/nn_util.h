// Helpers shared by the operator files of the nn and reduction families (nn_*.cc and
// reduction_*.cc): sub-family registration, dtype dispatch, 16-bit widening, axes and
// window geometry.
#pragma once

#include <algorithm>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/dnnl_conv.h"
#include "runtime/cpu/op_context.h"

namespace ampc::rt::cpu {
class OpRegistry;
}  // namespace ampc::rt::cpu

// In their own namespace so that they cannot collide with the other families' helpers.
namespace ampc::rt::cpu::nn {

// Sub-families, registered by register_nn_ops (nn_ops.cc) and register_reduction_ops
// (reduction_ops.cc).
void register_matmul_ops(OpRegistry& r);   // nn_matmul.cc: MatMul, Gemm
void register_conv_ops(OpRegistry& r);     // nn_conv.cc: Conv, ConvTranspose
void register_pool_ops(OpRegistry& r);     // nn_pool.cc: *Pool, MaxUnpool
void register_norm_ops(OpRegistry& r);     // nn_norm.cc: normalisation layers
void register_softmax_ops(OpRegistry& r);  // reduction_softmax.cc: (Log)Softmax, Hardmax
void register_row_ops(OpRegistry& r);      // row_ops.cc: the generic row ops (LpNormalization)
void register_loss_ops(OpRegistry& r);     // reduction_loss.cc: NLL and SCE losses
void register_integer_ops(OpRegistry& r);  // nn_integer.cc: MatMulInteger, ConvInteger

// The products themselves, for ops built on them (T = float or double; defined in
// nn_matmul.cc and nn_conv.cc): MatMul of a and b with numpy semantics, and Conv of x with
// w and optional bias b under the step's attributes.
template <typename T>
Tensor matmul_of(const OpContext& ctx, const Tensor& a, const Tensor& b);
template <typename T>
Tensor conv_of(const OpContext& ctx, const Tensor& x, const Tensor& w, const Tensor* b);

using OpFn = void (*)(OpContext&);

// Runs `op` with every float input in one compute type: double when input 0 is double, fp32
// otherwise. 16-bit inputs are widened exactly; each fp32 output is then rounded once
// (round-to-nearest-even) to the dtype of input out_like[i] (0 when out_like is shorter;
// -1 keeps the output as op made it). This is amp-semantics.md section 1: 16-bit storage,
// fp32 math, one rounding per stored value.
void run_widened(OpContext& ctx, OpFn op, const std::vector<int>& out_like = {});
// Registers `op` behind run_widened.
void add_widened(OpRegistry& r, const std::string& name, OpFn op, std::vector<int> out_like = {},
                 const std::string& domain = "");

// A copy of a float tensor (f16, bf16, f32, f64) in another float dtype.
Tensor convert_float(const Tensor& t, DType to);

// Calls f(T{}) for the type T among Ts whose dtype is `dtype`; false when there is none.
template <typename... Ts, typename F>
bool dispatch(DType dtype, F&& f) {
  return ((dtype == dtype_of<Ts>() ? (f(Ts{}), true) : false) || ...);
}

// f(float{}) or f(double{}) by the dtype of input 0; other dtypes are refused.
template <typename F>
void dispatch_float(const OpContext& ctx, F&& f) {
  if (!dispatch<float, double>(ctx.in(0).dtype(), f)) ctx.unsupported_dtype(0);
}

// One axis of ONNX Slice over a dimension of `dim` elements: the first index read and how
// many are read (negative starts and ends count from the end, both clamped as ONNX says;
// step != 0). Shared by the CPU op and the CUDA step builder.
struct SliceAxis {
  int64_t start = 0;
  int64_t count = 0;
};
inline SliceAxis slice_axis(int64_t start, int64_t end, int64_t step, int64_t dim) {
  int64_t s = start < 0 ? start + dim : start;
  int64_t e = end < 0 ? end + dim : end;
  if (step > 0) {
    s = std::clamp<int64_t>(s, 0, dim);
    e = std::clamp<int64_t>(e, 0, dim);
    return {s, e > s ? (e - s - 1) / step + 1 : 0};
  }
  s = std::clamp<int64_t>(s, 0, dim - 1);
  e = std::clamp<int64_t>(e, -1, dim - 1);
  return {s, s > e ? (s - e - 1) / -step + 1 : 0};
}
// ONNX Slice's ranges completed as the specification says: axes default to 0, 1, ..., steps to
// 1; fails unless the four have one entry per sliced axis and no step is 0. The axes stay as
// given (negative ones too). Pad's pads (the begins of each of `axes`, then their ends; no
// axes: every axis in order) as a before and an after for each of `rank` axes; fails on a
// count that does not match or an axis out of range. The legalize stage calls these for
// constant operands (lower/legalize_movement.cc), the CPU ops for operands computed at run time.
void complete_slice_ranges(const OpContext& ctx, const std::vector<int64_t>& starts,
                           const std::vector<int64_t>& ends, std::vector<int64_t>& axes,
                           std::vector<int64_t>& steps);
void pads_per_axis(const OpContext& ctx, const std::vector<int64_t>& pads,
                   std::vector<int64_t> axes, int64_t rank, std::vector<int64_t>& before,
                   std::vector<int64_t>& after);
// Product of dims[begin, end).
int64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end);

// src broadcast (numpy rules, src may have lower rank) to `shape`, as a flat vector; fails
// when the shapes do not broadcast that way.
template <typename T>
std::vector<T> expand_to(const OpContext& ctx, const Tensor& src,
                         const std::vector<int64_t>& shape);

// DepthToSpace (to_space) and SpaceToDepth as one transpose of a 6-D view of the 4-D input x:
// `view` splits x's dims into blocks, `perm` lists the view's axes in the output's order, `out`
// is the output's shape. From the step's BlockParams; fails unless x divides into the blocks.
// Shared by the CPU op and the CUDA step builder.
struct BlockMove {
  std::vector<int64_t> view, perm, out;
};
BlockMove block_move(const OpContext& ctx, const std::vector<int64_t>& x, bool to_space);

// Window geometry of Conv and the pooling ops (and their gradients) for input spatial sizes
// `in` (1 to 3 dims), from the step's WindowParams (the kernel falling back to `kernel`, a
// convolution's weights): SAME padding and the output sizes follow from `in`. image = input,
// cols = output. Both backends call this.
kernels::cpu::ConvGeom window_geometry(const OpContext& ctx, const std::vector<int64_t>& in,
                                       std::vector<int64_t> kernel);
// ConvTranspose's geometry for input spatial sizes `in` and the weights' `kernel`, from the
// step's WindowParams (output_padding, output_shape and auto_pad settled as ONNX defines them):
// the image side is the output, cols the input, pad the begin pad of the convolution it
// transposes. Both backends call this.
kernels::cpu::ConvGeom conv_transpose_geometry(const OpContext& ctx, const std::vector<int64_t>& in,
                                               const std::vector<int64_t>& kernel);
// The ConvGeom slot of spatial axis i of n (1 to 3): n axes use the last n slots.
int geom_slot(size_t i, size_t n);
// The output (cols) spatial sizes of the last n slots.
std::vector<int64_t> geom_cols(const kernels::cpu::ConvGeom& g, size_t n);
// The oneDNN convolution of geometry g over `spatial` axes (element types fp32; the caller
// sets others): n images of c channels, m filters in `group` groups.
kernels::cpu::DnnlConv dnnl_conv_problem(const kernels::cpu::ConvGeom& g, size_t spatial, int64_t n,
                                         int64_t c, int64_t m, int64_t group);
// Fails unless an input of this rank ([N, C, spatial...]) has 1 to 3 spatial dimensions.
void check_spatial_rank(const OpContext& ctx, int64_t rank);

}  // namespace ampc::rt::cpu::nn
