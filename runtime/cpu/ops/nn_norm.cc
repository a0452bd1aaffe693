// Normalisation layers: BatchNormalization (inference and training mode), LayerNormalization,
// LRN, MeanVarianceNormalization (InstanceNormalization is a generic row op: row_ops.cc).
#include <cmath>

#include "kernels/cpu/norm.h"
#include "kernels/shared/kernel_args.h"
#include "kernels/twin/batchnorm.h"
#include "kernels/twin/layernorm.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu::nn {
namespace {

namespace k = kernels::cpu;

// The per-channel parameter `input`: C values, of the dtype of input `like`.
const void* channel_param(const OpContext& ctx, int input, int64_t c, int like) {
  const Tensor& t = ctx.in(input);
  if (t.numel() != c) {
    ctx.fail("input " + std::to_string(input) + " " + t.type_str() + " does not have " +
             std::to_string(c) + " elements (one per channel)");
  }
  if (t.dtype() != ctx.in(like).dtype() || !is_float(t.dtype())) {
    ctx.fail("input " + std::to_string(input) + " " + t.type_str() + " is not a float of input " +
             std::to_string(like) + "'s type " + ctx.in(like).type_str());
  }
  return t.raw();
}

// The CUDA kernels' CPU twin (kernels/twin/batchnorm.h): the batch statistics summed in the
// kernels' order, so both backends agree bit for bit. It takes each operand in its own type, as
// the kernels do: 16-bit X (a bf16 or fp16 plan) loaded exactly into fp32 math and Y rounded once,
// with fp32 scale, bias and statistics, which are the bits of the op run on fp32 copies, without
// making them.
void batch_norm(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (x.rank() < 2) ctx.fail("input " + x.type_str() + " has no channel dimension");
  if (!is_float(x.dtype())) ctx.fail("input " + x.type_str() + " is not a float tensor");
  const plan::BatchNormParams& p = plan::params<plan::BatchNormParams>(ctx.step());
  const int64_t n = x.dim(0), c = x.dim(1), spatial = product(x.shape(), 2, x.shape().size());
  const void* scale = channel_param(ctx, 1, c, 1);
  const void* bias = channel_param(ctx, 2, c, 1);
  const void* mean = channel_param(ctx, 3, c, 3);
  const void* var = channel_param(ctx, 4, c, 3);
  const float eps = p.epsilon();
  const DType t = x.dtype(), pt = ctx.in(1).dtype(), st = ctx.in(3).dtype();
  void* y = ctx.output(0, t, x.shape()).raw();
  if (!p.training()) {
    return kernels::twin::batch_norm_inference(t, pt, st, x.raw(), n, c, spatial, scale, bias, mean,
                                               var, eps, y);
  }
  // Running statistics: input * momentum + batch * (1 - momentum) (biased batch variance);
  // before opset 14 also the batch statistics (saved_mean, saved_var).
  auto stat = [&](int i) { return ctx.has_output(i) ? ctx.output(i, st, {c}).raw() : nullptr; };
  void* running_mean = stat(1);
  void* running_var = stat(2);
  void* saved_mean = p.saved_statistics() ? stat(3) : nullptr;
  void* saved_var = p.saved_statistics() ? stat(4) : nullptr;
  thread_local std::vector<char> workspace;
  workspace.resize(kernels::twin::batch_norm_training_workspace_bytes(n, c, spatial));
  kernels::twin::batch_norm_training(t, pt, st, x.raw(), n, c, spatial, scale, bias, mean, var, eps,
                                     p.momentum(), y, running_mean, running_var, saved_mean,
                                     saved_var, workspace.data());
}

// ampc.BatchNormalizationGrad(dY, X, scale) -> dX, dScale, dBias (each optional): the backward of
// training mode (passes/autodiff/rules_nn.cc), the CUDA kernels' twin like the forward: the
// statistics recomputed in the forward's order, dY and X in their own (16-bit) type, the
// parameter gradients in scale's.
void batch_norm_grad(OpContext& ctx) {
  const Tensor &dy = ctx.in(0), &x = ctx.in(1);
  if (x.rank() < 2) ctx.fail("input " + x.type_str() + " has no channel dimension");
  if (!is_float(x.dtype())) ctx.fail("input " + x.type_str() + " is not a float tensor");
  if (dy.dtype() != x.dtype() || dy.shape() != x.shape())
    ctx.fail("dY " + dy.type_str() + " does not match X " + x.type_str());
  const int64_t n = x.dim(0), c = x.dim(1), spatial = product(x.shape(), 2, x.shape().size());
  const Tensor& scale = ctx.in(2);
  if (scale.numel() != c || !is_float(scale.dtype()))
    ctx.fail("scale " + scale.type_str() + " is not one float per channel");
  const DType pt = scale.dtype();
  void* dx = ctx.has_output(0) ? ctx.output(0, x.dtype(), x.shape()).raw() : nullptr;
  void* dscale = ctx.has_output(1) ? ctx.output(1, pt, scale.shape()).raw() : nullptr;
  void* dbias = ctx.has_output(2) ? ctx.output(2, pt, scale.shape()).raw() : nullptr;
  thread_local std::vector<char> workspace;
  workspace.resize(kernels::twin::batch_norm_grad_workspace_bytes(n, c, spatial));
  kernels::twin::batch_norm_grad(x.dtype(), pt, x.raw(), dy.raw(), n, c, spatial, scale.raw(),
                                 plan::params<plan::BatchNormParams>(ctx.step()).epsilon(), dx,
                                 dscale, dbias, workspace.data());
}

// ampc.LayerNormalizationGrad(dY, X, scale) -> dX, dScale, dB (each optional): the backward
// (passes/autodiff/rules_nn.cc), the CUDA kernels' twin: the statistics recomputed in the
// forward's order, dY and X in their own type (dY of X's, or 16-bit with f32 X: read widened,
// passes/widened_row_grads.h), the parameter gradients in scale's.
void layer_norm_grad(OpContext& ctx) {
  const Tensor &dy = ctx.in(0), &x = ctx.in(1), &scale = ctx.in(2);
  if (!is_float(x.dtype())) ctx.fail("input " + x.type_str() + " is not a float tensor");
  if (!kernels::shared::grad_input_fits(dy.dtype(), x.dtype()) || dy.shape() != x.shape())
    ctx.fail("dY " + dy.type_str() + " does not match X " + x.type_str());
  const plan::RowShape shape =
      plan::row_shape(plan::params<plan::RowwiseParams>(ctx.step()), x.shape());
  const int64_t rows = shape.outer, cols = shape.n;
  if (scale.numel() != cols || !is_float(scale.dtype()))
    ctx.fail("scale " + scale.type_str() + " does not hold one float per normalised element");
  const DType pt = scale.dtype();
  void* dx = ctx.has_output(0) ? ctx.output(0, x.dtype(), x.shape()).raw() : nullptr;
  void* dscale = ctx.has_output(1) ? ctx.output(1, pt, scale.shape()).raw() : nullptr;
  void* dbias = ctx.has_output(2) ? ctx.output(2, pt, scale.shape()).raw() : nullptr;
  thread_local std::vector<char> workspace;
  workspace.resize(kernels::twin::layer_norm_grad_workspace_bytes(x.dtype(), rows, cols));
  kernels::twin::layer_norm_grad(
      x.dtype(), dy.dtype(), x.raw(), dy.raw(), rows, cols, pt, scale.raw(),
      plan::params<plan::RowwiseParams>(ctx.step()).epsilon(), dx, dscale, dbias, workspace.data());
}

template <typename T>
void layer_norm(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t rank = x.rank();
  const plan::RowwiseParams& p = plan::params<plan::RowwiseParams>(ctx.step());
  const auto axis = static_cast<size_t>(p.axis());
  const std::vector<int64_t> norm_shape(x.shape().begin() + axis, x.shape().end());
  const plan::RowShape shape = plan::row_shape(p, x.shape());
  const int64_t rows = shape.outer, cols = shape.n;
  const std::vector<T> scale = expand_to<T>(ctx, ctx.in(1), norm_shape);
  std::vector<T> bias;
  if (ctx.input(2)) bias = expand_to<T>(ctx, *ctx.input(2), norm_shape);
  const auto stash = static_cast<DType>(p.stash_type());
  std::vector<int64_t> stat_shape(x.shape().begin(), x.shape().begin() + axis);
  stat_shape.resize(rank, 1);
  Tensor mean(dtype_of<T>(), stat_shape), inv_std(dtype_of<T>(), stat_shape);
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  // The CUDA kernel's host side (kernels/twin/layernorm.h): the GPU's bits.
  const DType t = dtype_of<T>();
  kernels::twin::layer_norm(t, x.data<T>(), rows, cols, t, scale.data(),
                            bias.empty() ? nullptr : bias.data(), p.epsilon(), y.data<T>(), t,
                            ctx.has_output(1) ? mean.data<T>() : nullptr,
                            ctx.has_output(2) ? inv_std.data<T>() : nullptr);
  Tensor* stats[2] = {&mean, &inv_std};
  for (int i = 0; i < 2; ++i) {
    if (!ctx.has_output(1 + i)) continue;
    ctx.set_output(1 + i,
                   stash == dtype_of<T>() ? std::move(*stats[i]) : convert_float(*stats[i], stash));
  }
}

template <typename T>
void lrn(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (x.rank() < 2) ctx.fail("input " + x.type_str() + " has no channel dimension");
  const int64_t size = ctx.attr_int("size");
  if (size <= 0) ctx.fail("attribute 'size' must be positive");
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  k::lrn(x.data<T>(), x.dim(0), x.dim(1), product(x.shape(), 2, x.shape().size()), size,
         static_cast<T>(ctx.attr_float("alpha", 1e-4f)),
         static_cast<T>(ctx.attr_float("beta", 0.75f)),
         static_cast<T>(ctx.attr_float("bias", 1.0f)), y.data<T>());
}

template <typename T>
void mean_variance_norm(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  std::vector<bool> reduced(x.rank(), false);
  for (int64_t a : ctx.attr_ints("axes", {0, 2, 3}))
    reduced[normalize_axis(ctx, a, x.rank())] = true;
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  k::mean_variance_norm(x.data<T>(), x.shape(), reduced, T(1e-9), y.data<T>());
}

}  // namespace

void register_norm_ops(OpRegistry& r) {
  r.add("BatchNormalization", batch_norm);
  r.add("BatchNormalizationGrad", batch_norm_grad, "ampc");
  r.add("LayerNormalizationGrad", layer_norm_grad, "ampc");
  add_widened(
      r, "LayerNormalization",
      [](OpContext& ctx) { dispatch_float(ctx, [&](auto t) { layer_norm<decltype(t)>(ctx); }); },
      {0, -1, -1});
  add_widened(r, "LRN",
              [](OpContext& ctx) { dispatch_float(ctx, [&](auto t) { lrn<decltype(t)>(ctx); }); });
  add_widened(r, "MeanVarianceNormalization", [](OpContext& ctx) {
    dispatch_float(ctx, [&](auto t) { mean_variance_norm<decltype(t)>(ctx); });
  });
}

}  // namespace ampc::rt::cpu::nn
