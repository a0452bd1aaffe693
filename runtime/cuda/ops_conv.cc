// Conv, ampc.Conv (the same op with bf16, passes/autocast.cc), ampc.ConvGrad (dX, dW, dB;
// runtime/cpu/ops/grad_ops.cc), ConvTranspose and ampc.ConvTranspose (a backward-data pass)
// through cuDNN (cudnn_conv.h); the bias is added by kernels/cuda/bias.h, the bias gradient is the
// reduction kernel's sum of dY over all axes but the channels. The window geometry is the CPU
// backend's (nn::window_geometry, nn::conv_transpose_geometry) from the step's typed WindowParams,
// so both backends derive it alike; a padding cuDNN's symmetric one cannot stand for is refused.
#include <array>
#include <functional>
#include <memory>

#include "kernels/cuda/bias.h"
#include "kernels/cuda/reduce.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/cuda/cudnn_conv.h"
#include "runtime/cuda/op_builders.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cuda {
namespace {

// Whether cuDNN's symmetric padding (the begin pad at both ends) gives the convolution of
// geometry g along `slot` its windows: when the end pad equals the begin pad, or when the other
// end pad leaves the same number of windows (an end pad no window reaches, as the gradient of a
// ConvTranspose with output padding has). The same windows read the same values: the output.
bool symmetric_serves(const kernels::cpu::ConvGeom& g, size_t slot) {
  if (g.pad[slot] == g.pad_end[slot]) return true;
  const int64_t reach = (g.kernel[slot] - 1) * g.dilation[slot] + 1;
  auto windows = [&](int64_t end) {
    const int64_t span = g.image[slot] + g.pad[slot] + end - reach;
    return span < 0 ? int64_t{0} : span / g.stride[slot] + 1;
  };
  return windows(g.pad[slot]) == windows(g.pad_end[slot]);
}

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
    if (!symmetric_serves(g, slot)) {
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

// `pass` (a cuDNN call writing output 0, Y [N, M, spatial...] of type dtype), then B (input 2,
// when given) added over the N * M planes of Y.
Launch then_bias(const StepContext& ctx, const std::vector<int64_t>& y_shape, DType dtype,
                 std::function<void(void* y, cudaStream_t)> pass) {
  const bool bias = ctx.has_input(2);
  const DevPtr b = ctx.in(2), y = ctx.out(0);
  const int64_t planes_n = y_shape[0], channels = y_shape[1];
  int64_t spatial = 1;
  for (size_t i = 2; i < y_shape.size(); ++i) spatial *= y_shape[i];
  return [=](cudaStream_t stream) {
    pass(y.get(), stream);
    if (bias)
      kernels::cuda::add_channel_bias(dtype, y.get(), b.get(), planes_n, channels, spatial, stream);
  };
}

Launch build_conv(StepContext& ctx) {
  const ConvShape s = check_conv(ctx);
  auto conv = std::make_shared<CudnnConv>(ctx.handles().dnn, s, true, false, false, ctx.label());
  const WorkspacePtr ws = ctx.workspace(static_cast<int64_t>(conv->workspace_bytes()));
  const DevPtr x = ctx.in(0), w = ctx.in(1);
  return then_bias(ctx, s.y, s.dtype, [=](void* y, cudaStream_t stream) {
    conv->forward(x.get(), w.get(), y, ws.get(), stream);
  });
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

// ConvTranspose is the backward-data pass of the convolution it transposes, as torch runs it
// on cuDNN: that convolution's image is Y [N, M, out...], its filter W [C, M / group, k...], its
// output X [N, C, in...]. The geometry is the CPU op's (cpu::nn::conv_transpose_geometry).
// cuDNN pads both ends alike: it serves when that convolution of Y, padded by the begin pad at
// both ends, has exactly X's sizes (torch's padding, with an output padding short of a stride);
// other paddings are refused.
ConvShape check_conv_transpose(const StepContext& ctx) {
  const std::vector<int64_t> x = ctx.in_shape(0), w = ctx.in_shape(1);
  ConvShape s;
  s.dtype = ctx.in_dtype(0);
  if (ctx.in_dtype(1) != s.dtype) ctx.fail("X and W have different element types");
  cpu::nn::check_spatial_rank(ctx.attrs(), static_cast<int64_t>(x.size()));
  s.group = plan::params<plan::WindowParams>(ctx.step()).group();
  if (w.size() != x.size() || s.group <= 0 || x[1] != w[0] || x[1] % s.group) {
    ctx.fail("X " + shape_str(x) + " and W " + shape_str(w) + " do not fit group " +
             std::to_string(s.group));
  }
  const size_t n = x.size() - 2;
  const std::vector<int64_t> in(x.begin() + 2, x.end()), kernel(w.begin() + 2, w.end());
  const auto g = cpu::nn::conv_transpose_geometry(ctx.attrs(), in, kernel);
  s.x = {x[0], w[1] * s.group};
  s.w = w;
  s.y = x;
  for (size_t i = 0; i < n; ++i) {
    const int slot = cpu::nn::geom_slot(i, n);
    const int64_t out = g.image[slot], pad = g.pad[slot], stride = g.stride[slot];
    const int64_t span = out + 2 * pad - ((g.kernel[slot] - 1) * g.dilation[slot] + 1);
    if (pad < 0 || span < 0 || span / stride + 1 != in[i]) {
      ctx.fail("its padding (begin " + std::to_string(pad) + ", output size " +
               std::to_string(out) + " on spatial axis " + std::to_string(i) +
               ") is not the symmetric padding cuDNN's backward data pass serves");
    }
    s.pads.push_back(pad);
    s.strides.push_back(stride);
    s.dilations.push_back(g.dilation[slot]);
    s.x.push_back(out);
  }
  if (ctx.out_shape(0) != s.x || ctx.out_dtype(0) != s.dtype)
    ctx.fail("the output " + describe_buffer(ctx.output(0)) + " is not X's type " + shape_str(s.x));
  if (ctx.has_input(2) && (ctx.in_dtype(2) != s.dtype || ctx.in_numel(2) != s.x[1]))
    ctx.fail("B " + describe_buffer(ctx.input(2)) + " must hold one value of X's type per channel");
  return s;
}

Launch build_conv_transpose(StepContext& ctx) {
  const ConvShape s = check_conv_transpose(ctx);
  auto conv = std::make_shared<CudnnConv>(ctx.handles().dnn, s, false, true, false, ctx.label());
  const WorkspacePtr ws = ctx.workspace(static_cast<int64_t>(conv->workspace_bytes()));
  const DevPtr x = ctx.in(0), w = ctx.in(1);
  // X is the transposed convolution's dY, Y its dX.
  return then_bias(ctx, s.x, s.dtype, [=](void* y, cudaStream_t stream) {
    conv->data_grad(x.get(), w.get(), y, ws.get(), stream);
  });
}

bool is_conv_transpose(const plan::Step& step) {
  return (step.domain().empty() || step.domain() == "ampc") && step.op() == "ConvTranspose";
}

bool is_conv(const plan::Step& step) {
  return (step.domain().empty() || step.domain() == "ampc") && step.op() == "Conv";
}

}  // namespace

bool uses_cudnn(const plan::Step& step) {
  return is_conv(step) || is_conv_transpose(step) ||
         (step.domain() == "ampc" && step.op() == "ConvGrad");
}

void check_conv_step(StepContext& ctx) {
  if (is_conv(ctx.step())) {
    (void)check_conv(ctx);
  } else if (is_conv_transpose(ctx.step())) {
    (void)check_conv_transpose(ctx);
  } else {
    (void)check_conv_grad(ctx);
  }
}

void register_conv_ops(BuilderTable& t) {
  t.add("", "Conv", build_conv);
  t.add("ampc", "Conv", build_conv);  // bf16 Conv (ONNX's Conv has no bf16)
  t.add("ampc", "ConvGrad", build_conv_grad);
  t.add("", "ConvTranspose", build_conv_transpose);
  t.add("ampc", "ConvTranspose", build_conv_transpose);  // bf16 (ONNX's has no bf16)
}

}  // namespace ampc::rt::cuda
