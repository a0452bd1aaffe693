// Conv, ampc.Conv (the same op with bf16, passes/autocast.cc) and ampc.ConvGrad (dX, dW, dB;
// runtime/cpu/ops/grad_ops.cc) through cuDNN (cudnn_conv.h); the bias is added by
// kernels/cuda/bias.h, the bias gradient is the reduction kernel's sum of dY over all axes but
// the channels. The window geometry is the CPU backend's (nn::window_geometry) from the step's
// typed WindowParams, so both backends derive it alike; asymmetric padding is refused.
#include <array>
#include <memory>

#include "kernels/cuda/bias.h"
#include "kernels/cuda/reduce.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/cuda/cudnn_conv.h"
#include "runtime/cuda/op_builders.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cuda {
namespace {

// The convolution of X (input x_index) with W (input w_index) under the step's attributes.
ConvShape conv_shape(const StepContext& ctx, int x_index, int w_index,
                     const std::vector<int64_t>& y) {
  ConvShape s;
  s.dtype = ctx.in_dtype(x_index);
  s.x = ctx.in_shape(x_index);
  s.w = ctx.in_shape(w_index);
  s.y = y;
  if (ctx.in_dtype(w_index) != s.dtype) ctx.fail("X and W have different element types");
  cpu::nn::check_spatial_rank(ctx.attrs(), static_cast<int64_t>(s.x.size()));
  s.group = plan::params<plan::WindowParams>(ctx.step()).group();
  if (s.w.size() != s.x.size() || s.group <= 0 || s.x[1] != s.w[1] * s.group || s.w[0] % s.group) {
    ctx.fail("X " + shape_str(s.x) + " and W " + shape_str(s.w) + " do not fit group " +
             std::to_string(s.group));
  }
  const size_t n = s.x.size() - 2;
  const std::vector<int64_t> in(s.x.begin() + 2, s.x.end());
  const std::vector<int64_t> kernel(s.w.begin() + 2, s.w.end());
  const auto g = cpu::nn::window_geometry(ctx.attrs(), in, kernel);
  std::vector<int64_t> expect = {s.x[0], s.w[0]};
  for (size_t i = 0; i < n; ++i) {
    const size_t slot = 3 - n + i;
    if (g.pad[slot] != g.pad_end[slot]) {
      ctx.fail("asymmetric padding (" + std::to_string(g.pad[slot]) + " before, " +
               std::to_string(g.pad_end[slot]) + " after) is not supported by cuDNN");
    }
    s.pads.push_back(g.pad[slot]);
    s.strides.push_back(g.stride[slot]);
    s.dilations.push_back(g.dilation[slot]);
    expect.push_back(g.cols[slot]);
  }
  if (expect != y)
    ctx.fail("the output " + shape_str(y) + " is not the convolution's " + shape_str(expect));
  return s;
}

// Conv's checks (no library call): the shape, Y's type, the bias.
ConvShape check_conv(const StepContext& ctx) {
  const ConvShape s = conv_shape(ctx, 0, 1, ctx.out_shape(0));
  if (ctx.out_dtype(0) != s.dtype) ctx.fail("Y's type differs from X's");
  if (ctx.has_input(2) && (ctx.in_dtype(2) != s.dtype || ctx.in_numel(2) != s.w[0]))
    ctx.fail("B " + describe_buffer(ctx.input(2)) + " must hold one value of X's type per channel");
  return s;
}

Launch build_conv(StepContext& ctx) {
  const ConvShape s = check_conv(ctx);
  auto conv = std::make_shared<CudnnConv>(ctx.handles().dnn, s, true, false, false, ctx.label());
  const bool bias = ctx.has_input(2);
  const WorkspacePtr ws = ctx.workspace(static_cast<int64_t>(conv->workspace_bytes()));
  const DevPtr x = ctx.in(0), w = ctx.in(1), b = ctx.in(2), y = ctx.out(0);
  // y [N, M, spatial...]: the bias over N * M planes of the spatial size.
  const int64_t planes_n = s.y[0], channels = s.y[1];
  int64_t spatial = 1;
  for (size_t i = 2; i < s.y.size(); ++i) spatial *= s.y[i];
  const DType dtype = s.dtype;
  return [=](cudaStream_t stream) {
    conv->forward(x.get(), w.get(), y.get(), ws.get(), stream);
    if (bias)
      kernels::cuda::add_channel_bias(dtype, y.get(), b.get(), planes_n, channels, spatial, stream);
  };
}

// ConvGrad's checks (no library call): the shape, the outputs' types and shapes.
struct ConvGradCheck {
  ConvShape s;
  bool dx, dw, db;
};
ConvGradCheck check_conv_grad(const StepContext& ctx) {
  // Inputs dY, X, W; outputs dX, dW, dB, each optional.
  ConvGradCheck c{conv_shape(ctx, 1, 2, ctx.in_shape(0)), ctx.has_output(0), ctx.has_output(1),
                  ctx.has_output(2)};
  const ConvShape& s = c.s;
  if (ctx.in_dtype(0) != s.dtype) ctx.fail("dY's type differs from X's");
  if (c.dx && (ctx.out_dtype(0) != s.dtype || ctx.out_shape(0) != s.x))
    ctx.fail("dX must have X's type");
  if (c.dw && (ctx.out_dtype(1) != s.dtype || ctx.out_shape(1) != s.w))
    ctx.fail("dW must have W's type");
  if (c.db && (ctx.out_dtype(2) != s.dtype || ctx.out_numel(2) != s.w[0]))
    ctx.fail("dB must hold one value of X's type per output channel");
  if (s.y.size() > 8) ctx.fail("dY has too many dimensions");
  return c;
}

Launch build_conv_grad(StepContext& ctx) {
  const ConvGradCheck c = check_conv_grad(ctx);
  const ConvShape& s = c.s;
  const bool dx = c.dx, dw = c.dw, db = c.db;
  auto conv = std::make_shared<CudnnConv>(ctx.handles().dnn, s, false, dx, dw, ctx.label());
  int64_t need = static_cast<int64_t>(conv->workspace_bytes());
  // dB: dY summed over every axis but the channels.
  const std::vector<int64_t> dims = s.y;
  std::array<bool, 8> reduced{};
  for (size_t i = 0; i < dims.size(); ++i) reduced[i] = i != 1;
  if (db) {
    need =
        std::max<int64_t>(need, static_cast<int64_t>(kernels::cuda::reduce_workspace_bytes(
                                    kernels::cuda::ReduceOp::kSum, s.dtype,
                                    static_cast<int>(dims.size()), dims.data(), reduced.data())));
  }
  const WorkspacePtr ws = ctx.workspace(need);
  const DevPtr dy = ctx.in(0), x = ctx.in(1), w = ctx.in(2), gx = ctx.out(0), gw = ctx.out(1),
               gb = ctx.out(2);
  const DType dtype = s.dtype;
  return [=](cudaStream_t stream) {
    if (dx) conv->data_grad(dy.get(), w.get(), gx.get(), ws.get(), stream);
    if (dw) conv->filter_grad(dy.get(), x.get(), gw.get(), ws.get(), stream);
    if (db) {
      kernels::cuda::reduce(kernels::cuda::ReduceOp::kSum, dtype, dy.get(), gb.get(),
                            static_cast<int>(dims.size()), dims.data(), reduced.data(), ws.get(),
                            stream);
    }
  };
}

bool is_conv(const plan::Step& step) {
  return (step.domain().empty() || step.domain() == "ampc") && step.op() == "Conv";
}

}  // namespace

bool uses_cudnn(const plan::Step& step) {
  return is_conv(step) || (step.domain() == "ampc" && step.op() == "ConvGrad");
}

void check_conv_step(StepContext& ctx) {
  if (is_conv(ctx.step())) {
    (void)check_conv(ctx);
  } else {
    (void)check_conv_grad(ctx);
  }
}

void register_conv_ops(BuilderTable& t) {
  t.add("", "Conv", build_conv);
  t.add("ampc", "Conv", build_conv);  // bf16 Conv (ONNX's Conv has no bf16)
  t.add("ampc", "ConvGrad", build_conv_grad);
}

}  // namespace ampc::rt::cuda
