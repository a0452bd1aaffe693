// Conv (oneDNN, or GEMMs over the active taps where the weights outweigh the activations;
// im2col + GEMM where neither serves) and ConvTranspose (the backward-data pass of the
// convolution it transposes, through the same two; GEMM + col2im where neither serves), 1 to 3
// spatial dimensions.
#include <type_traits>
#include <vector>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_gemm.h"
#include "kernels/cpu/dnnl_conv.h"
#include "kernels/cpu/dnnl_matmul.h"
#include "kernels/cpu/elementwise.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu::nn {
namespace {

namespace k = kernels::cpu;

int64_t floor_div2(int64_t a) {
  return a >= 0 ? a / 2 : -((-a + 1) / 2);
}

void check_bias(const OpContext& ctx, const Tensor* b, int64_t m) {
  if (b && b->numel() != m) {
    ctx.fail("bias " + b->type_str() + " does not have " + std::to_string(m) + " elements");
  }
}

// A checked Conv: geometry, output shape and sizes.
struct ConvCall {
  k::ConvGeom g;
  std::vector<int64_t> shape;
  size_t spatial = 0;
  int64_t n = 0, c = 0, m = 0, group = 1;
};

ConvCall conv_call(const OpContext& ctx, const Tensor& x, const Tensor& w, const Tensor* b) {
  check_spatial_rank(ctx, x.rank());
  if (w.rank() != x.rank())
    ctx.fail("weight " + w.type_str() + " does not match X " + x.type_str());
  ConvCall call;
  call.n = x.dim(0);
  call.c = x.dim(1);
  call.m = w.dim(0);
  const plan::WindowParams& p = plan::params<plan::WindowParams>(ctx.step());
  call.group = p.group();
  if (call.group <= 0 || call.c != w.dim(1) * call.group || call.m % call.group != 0) {
    ctx.fail("channels of X " + x.type_str() + " and W " + w.type_str() + " do not fit group " +
             std::to_string(call.group));
  }
  check_bias(ctx, b, call.m);
  const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
  const std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  call.g = window_geometry(ctx, in, kernel);
  if (!p.kernel().empty() && std::vector<int64_t>(p.kernel().begin(), p.kernel().end()) != kernel) {
    ctx.fail("kernel_shape does not match W " + w.type_str());
  }
  call.spatial = in.size();
  call.shape = {call.n, call.m};
  for (int64_t d : geom_cols(call.g, in.size())) call.shape.push_back(d);
  return call;
}

// y = conv(x, w) + b through oneDNN (as GEMMs where the weights outweigh the activations:
// conv_gemm.h), every operand of element type t; false when it cannot.
bool conv_dnnl(const ConvCall& call, DType t, const Tensor& x, const Tensor& w, const Tensor* b,
               Tensor& y) {
  const k::ConvGemm gemm{call.g, call.n, call.c, call.m, t};
  if (k::conv_gemm_serves(gemm, call.group) &&
      k::conv_gemm_forward(gemm, x.raw(), w.raw(), b ? b->raw() : nullptr, y.raw())) {
    return true;
  }
  kernels::cpu::DnnlConv p =
      dnnl_conv_problem(call.g, call.spatial, call.n, call.c, call.m, call.group);
  p.x_type = p.w_type = p.y_type = t;
  if (b) p.bias_type = b->dtype();
  return kernels::cpu::dnnl_conv_forward(p, x.raw(), w.raw(), b ? b->raw() : nullptr, y.raw());
}

// A Conv or ConvTranspose through the library (`run`: conv_dnnl, conv_transpose_dnnl) where X,
// W and B (when given) all have element type t, f32 or bf16 on a CPU with bf16 arithmetic: Y
// written in place, every element (oneDNN writes all or refuses before writing any). False,
// nothing written, where the types differ or the library does not serve the problem.
template <typename Call>
bool on_library(OpContext& ctx, DType t,
                Call (*checked)(const OpContext&, const Tensor&, const Tensor&, const Tensor*),
                bool (*run)(const Call&, DType, const Tensor&, const Tensor&, const Tensor*,
                            Tensor&)) {
  const Tensor& x = ctx.in(0);
  const Tensor& w = ctx.in(1);
  const Tensor* b = ctx.input(2);
  if (x.dtype() != t || w.dtype() != t || (b && b->dtype() != t)) return false;
  if (t == DType::kBFloat16 && !kernels::cpu::dnnl_bf16_native()) return false;
  const Call call = checked(ctx, x, w, b);
  Tensor& y = ctx.output_for_overwrite(0, t, call.shape);
  return y.numel() == 0 || run(call, t, x, w, b, y);
}

}  // namespace

k::ConvGeom conv_transpose_geometry(const OpContext& ctx, const std::vector<int64_t>& in,
                                    const std::vector<int64_t>& kernel) {
  const plan::WindowParams& p = plan::params<plan::WindowParams>(ctx.step());
  const size_t n = in.size();
  auto given = [n](const auto& field, int64_t fallback) {
    return field.empty() ? std::vector<int64_t>(n, fallback)
                         : std::vector<int64_t>(field.begin(), field.end());
  };
  const auto strides = given(p.strides(), 1), dilations = given(p.dilations(), 1),
             out_pad = given(p.output_padding(), 0);
  const std::vector<int64_t> pads = p.pads().empty()
                                        ? std::vector<int64_t>(2 * n, 0)
                                        : std::vector<int64_t>(p.pads().begin(), p.pads().end());
  const std::vector<int64_t> out_shape(p.output_shape().begin(), p.output_shape().end());
  if (!p.kernel().empty() && std::vector<int64_t>(p.kernel().begin(), p.kernel().end()) != kernel)
    ctx.fail("kernel_shape does not match the weights' spatial dimensions");
  if (strides.size() != n || dilations.size() != n || out_pad.size() != n || pads.size() != 2 * n ||
      (!out_shape.empty() && out_shape.size() != n)) {
    ctx.fail("strides, dilations, output_padding, pads or output_shape do not match the " +
             std::to_string(n) + " spatial dimensions of the input");
  }
  using W = plan::WindowParams;
  const bool same = p.auto_pad() == W::SAME_UPPER || p.auto_pad() == W::SAME_LOWER;
  k::ConvGeom g;
  for (size_t i = 0; i < n; ++i) {
    const int s = geom_slot(i, n);
    if (strides[i] <= 0 || dilations[i] <= 0) ctx.fail("strides and dilations must be positive");
    const int64_t full = strides[i] * (in[i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1;
    int64_t out, pb;
    if (!out_shape.empty() || same) {
      out = !out_shape.empty() ? out_shape[i] : in[i] * strides[i];
      const int64_t total = full - out;
      pb = p.auto_pad() == W::SAME_UPPER ? floor_div2(total) : total - floor_div2(total);
    } else if (p.auto_pad() == W::VALID) {
      out = full;
      pb = 0;
    } else {
      out = full - pads[i] - pads[i + n];
      pb = pads[i];
    }
    if (out < 0) ctx.fail("output size " + std::to_string(out) + " is negative");
    g.image[s] = out;
    g.cols[s] = in[i];
    g.kernel[s] = kernel[i];
    g.stride[s] = strides[i];
    g.dilation[s] = dilations[i];
    g.pad[s] = pb;
  }
  return g;
}

template <typename T>
Tensor conv_of(const OpContext& ctx, const Tensor& x, const Tensor& w, const Tensor* b) {
  const ConvCall call = conv_call(ctx, x, w, b);
  Tensor y(dtype_of<T>(), call.shape);
  if (y.numel() == 0) return y;
  if constexpr (std::is_same_v<T, float>) {
    if (conv_dnnl(call, DType::kFloat32, x, w, b, y)) return y;
  }
  k::conv_forward(call.g, x.data<T>(), w.data<T>(), b ? b->data<T>() : nullptr, y.data<T>(), call.n,
                  call.c, call.m, call.group);
  return y;
}
template Tensor conv_of<float>(const OpContext&, const Tensor&, const Tensor&, const Tensor*);
template Tensor conv_of<double>(const OpContext&, const Tensor&, const Tensor&, const Tensor*);

namespace {

// bf16 Conv on a CPU with bf16 arithmetic: oneDNN in bf16 (fp32 accumulation, one rounding
// of the output), no widening. False (nothing done) where it does not apply.
bool low_conv(OpContext& ctx) {
  return on_library(ctx, DType::kBFloat16, conv_call, conv_dnnl);
}

void conv_op(OpContext& ctx) {
  // Straight into the output's place where oneDNN serves it.
  if (on_library(ctx, DType::kFloat32, conv_call, conv_dnnl)) return;
  dispatch_float(ctx, [&](auto tag) {
    ctx.set_output(0, conv_of<decltype(tag)>(ctx, ctx.in(0), ctx.in(1), ctx.input(2)));
  });
}

// A checked ConvTranspose: the geometry of the convolution it transposes (image: Y's spatial
// sizes, cols: X's), Y's shape and the sizes (c: X's channels, m: Y's).
struct TransposeCall {
  k::ConvGeom g;
  std::vector<int64_t> shape;
  size_t spatial = 0;
  int64_t n = 0, c = 0, m = 0, group = 1;
};

TransposeCall conv_transpose_call(const OpContext& ctx, const Tensor& x, const Tensor& w,
                                  const Tensor* b) {
  check_spatial_rank(ctx, x.rank());
  if (w.rank() != x.rank())
    ctx.fail("weight " + w.type_str() + " does not match X " + x.type_str());
  TransposeCall call;
  call.n = x.dim(0);
  call.c = x.dim(1);
  call.group = plan::params<plan::WindowParams>(ctx.step()).group();
  if (call.group <= 0 || call.c != w.dim(0) || call.c % call.group != 0) {
    ctx.fail("channels of X " + x.type_str() + " and W " + w.type_str() + " do not fit group " +
             std::to_string(call.group));
  }
  call.m = w.dim(1) * call.group;
  check_bias(ctx, b, call.m);
  const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
  const std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  call.g = conv_transpose_geometry(ctx, in, kernel);
  call.spatial = in.size();
  call.shape = {call.n, call.m};
  for (size_t i = 0; i < in.size(); ++i)
    call.shape.push_back(call.g.image[geom_slot(i, in.size())]);
  return call;
}

// y[i, ch, :] += b[ch] in fp32 (b of y's type, or bf16), planes of `plane` elements.
void add_channel_bias(const TransposeCall& call, const Tensor& b, float* y) {
  const int64_t plane = call.g.image_size(), planes = call.n * call.m;
  const DType bt = b.dtype();
#pragma omp parallel for if (planes * plane > (1 << 18))
  for (int64_t i = 0; i < planes; ++i) {
    const int64_t ch = i % call.m;
    const float v =
        bt == DType::kFloat32 ? b.data<float>()[ch] : bf16_to_float(b.data<BFloat16>()[ch]);
    float* row = y + i * plane;
    for (int64_t j = 0; j < plane; ++j) row[j] += v;
  }
}

// y = conv_transpose(x, w) + b as the backward-data pass of the convolution it transposes
// (from Y's m channels to X's c), every operand of element type t (f32, or bf16 on a CPU with
// bf16 arithmetic): conv_gemm.h's GEMMs where the weights outweigh the activations, oneDNN
// otherwise, fp32 accumulation. A bf16 Y with a bias is summed in fp32 and rounded once, after
// the bias. False (the caller falls back) where neither serves.
bool conv_transpose_dnnl(const TransposeCall& call, DType t, const Tensor& x, const Tensor& w,
                         const Tensor* b, Tensor& y) {
  k::DnnlConv p = dnnl_conv_problem(call.g, call.spatial, call.n, call.m, call.c, call.group);
  p.x_type = p.w_type = p.y_type = t;
  if (b && t != DType::kFloat32) {
    p.x_type = DType::kFloat32;  // oneDNN's bf16 backward data writes fp32 sums
    // Kept per thread between steps (oneDNN overwrites every element): no allocation, no fill.
    thread_local std::vector<float> sums;
    sums.resize(static_cast<size_t>(y.numel()));
    if (!k::dnnl_conv_backward_data(p, x.raw(), w.raw(), sums.data())) return false;
    add_channel_bias(call, *b, sums.data());
    k::unary_map(sums.data(), y.data<BFloat16>(), y.numel(), [](auto v) { return v; });
    return true;
  }
  const k::ConvGemm gemm{call.g, call.n, call.m, call.c, t};
  const bool done = (k::conv_gemm_serves(gemm, call.group) &&
                     k::conv_gemm_backward_data(gemm, x.raw(), w.raw(), y.raw())) ||
                    k::dnnl_conv_backward_data(p, x.raw(), w.raw(), y.raw());
  if (done && b) add_channel_bias(call, *b, y.data<float>());
  return done;
}

// bf16 ConvTranspose on a CPU with bf16 arithmetic, no widening; false where it does not apply.
bool low_conv_transpose(OpContext& ctx) {
  return on_library(ctx, DType::kBFloat16, conv_transpose_call, conv_transpose_dnnl);
}

// GEMM + col2im: what the library does not serve, and doubles.
template <typename T>
void conv_transpose_of(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& w = ctx.in(1);
  const Tensor* b = ctx.input(2);
  const TransposeCall call = conv_transpose_call(ctx, x, w, b);
  Tensor& y = ctx.output(0, x.dtype(), call.shape);
  if (y.numel() == 0) return;
  k::conv_transpose(call.g, x.data<T>(), w.data<T>(), b ? b->data<T>() : nullptr, y.data<T>(),
                    call.n, call.c, call.m, call.group);
}

void conv_transpose_op(OpContext& ctx) {
  if (on_library(ctx, DType::kFloat32, conv_transpose_call, conv_transpose_dnnl)) return;
  dispatch_float(ctx, [&](auto tag) { conv_transpose_of<decltype(tag)>(ctx); });
}

}  // namespace

void register_conv_ops(OpRegistry& r) {
  auto conv = [](OpContext& ctx) {
    if (!low_conv(ctx)) run_widened(ctx, conv_op);
  };
  r.add("Conv", conv);
  // ampc.Conv: the same op where bfloat16 is allowed (ops/schemas/ampc_schemas.h).
  r.add("Conv", conv, "ampc");
  auto conv_transpose = [](OpContext& ctx) {
    if (!low_conv_transpose(ctx)) run_widened(ctx, conv_transpose_op);
  };
  r.add("ConvTranspose", conv_transpose);
  r.add("ConvTranspose", conv_transpose, "ampc");  // with bf16 (autocast)
}

}  // namespace ampc::rt::cpu::nn
