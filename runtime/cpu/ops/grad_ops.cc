// Gradient ops of ampc's "ampc" domain (their schemas: ops/schemas/ampc_schemas.h):
// ConvGrad, MaxPoolGrad and AveragePoolGrad. They take the forward op's window (WindowParams).
// ConvGrad computes in the input type (float or double; 16-bit inputs widened, or bf16 on
// oneDNN); the pooling gradients run the CUDA kernels' twin on any float type, fp32 math and
// one rounding per 16-bit result.
#include <algorithm>

#include "kernels/cpu/conv_gemm.h"
#include "kernels/cpu/conv_grad.h"
#include "kernels/cpu/depthwise_grad.h"
#include "kernels/cpu/dnnl_conv.h"
#include "kernels/cpu/dnnl_matmul.h"
#include "kernels/twin/pool.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu {
namespace {

namespace k = kernels::cpu;
using nn::check_spatial_rank;
using nn::geom_cols;
using nn::window_geometry;

// The forward op's window geometry for X; fails unless dY has its output shape.
k::ConvGeom forward_geometry(const OpContext& ctx, const Tensor& dy, const Tensor& x,
                             std::vector<int64_t> kernel, int64_t channels) {
  check_spatial_rank(ctx, x.rank());
  const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
  const k::ConvGeom g = window_geometry(ctx, in, std::move(kernel));
  std::vector<int64_t> shape = {x.dim(0), channels};
  for (int64_t d : geom_cols(g, in.size())) shape.push_back(d);
  if (dy.shape() != shape || dy.dtype() != x.dtype()) {
    ctx.fail("dY " + dy.type_str() + " does not match the forward output for X " + x.type_str());
  }
  return g;
}

// The checked geometry of a ConvGrad.
k::ConvGeom conv_grad_geometry(const OpContext& ctx) {
  const Tensor &dy = ctx.in(0), &x = ctx.in(1), &w = ctx.in(2);
  const int64_t group = plan::params<plan::WindowParams>(ctx.step()).group();
  if (w.rank() != x.rank() || group <= 0 || x.dim(1) != w.dim(1) * group || w.dim(0) % group) {
    ctx.fail("X " + x.type_str() + " and W " + w.type_str() + " do not fit group " +
             std::to_string(group));
  }
  const std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  return forward_geometry(ctx, dy, x, kernel, w.dim(0));
}

// The gradients a ConvGrad writes (null: not wanted, or already written).
template <typename T>
struct ConvGrads {
  T *dx = nullptr, *dw = nullptr, *db = nullptr;
  bool done() const { return !dx && !dw && !db; }
};

// The gradients' places, every element left to be written.
template <typename T>
ConvGrads<T> conv_grad_outputs(OpContext& ctx) {
  const Tensor &x = ctx.in(1), &w = ctx.in(2);
  auto out = [&](int i, const std::vector<int64_t>& shape) {
    return ctx.has_output(i) ? ctx.output_for_overwrite(i, x.dtype(), shape).template data<T>()
                             : nullptr;
  };
  return {out(0, x.shape()), out(1, w.shape()), out(2, {w.dim(0)})};
}

// Writes what oneDNN serves (every operand of element type t; as GEMMs where the weights
// outweigh the activations, conv_gemm.h) and, for a depthwise convolution, the weight and bias
// gradients by direct sums; returns the gradients left.
template <typename T>
ConvGrads<T> conv_grad_served(const OpContext& ctx, const k::ConvGeom& g, DType t,
                              ConvGrads<T> left) {
  const Tensor &dy = ctx.in(0), &x = ctx.in(1), &w = ctx.in(2);
  const int64_t group = plan::params<plan::WindowParams>(ctx.step()).group();
  k::DnnlConv p = nn::dnnl_conv_problem(g, static_cast<size_t>(x.rank() - 2), x.dim(0), x.dim(1),
                                        w.dim(0), group);
  p.x_type = p.w_type = p.y_type = p.bias_type = t;
  if (x.numel() == 0 || dy.numel() == 0) return left;
  const k::ConvGemm gemm{g, x.dim(0), x.dim(1), w.dim(0), t};
  if (left.dx && k::conv_gemm_serves(gemm, group) &&
      k::conv_gemm_backward_data(gemm, dy.raw(), w.raw(), left.dx)) {
    left.dx = nullptr;
  }
  if (left.dw && k::conv_gemm_serves_weight_grad(gemm, group) &&
      k::conv_gemm_backward_weights(gemm, dy.raw(), x.raw(), left.dw, left.db)) {
    left.dw = left.db = nullptr;
  }
  if (left.dx && k::dnnl_conv_backward_data(p, dy.raw(), w.raw(), left.dx)) left.dx = nullptr;
  if (left.dw && k::dnnl_conv_backward_weights(p, dy.raw(), x.raw(), left.dw, left.db)) {
    left.dw = left.db = nullptr;
  } else if (left.dw && group > 1 && group == x.dim(1)) {
    k::depthwise_weight_grad(g, dy.data<T>(), x.data<T>(), left.dw, left.db, x.dim(0), x.dim(1),
                             w.dim(0));
    left.dw = left.db = nullptr;
  }
  return left;
}

template <typename T>
void conv_grad(OpContext& ctx) {
  const Tensor &dy = ctx.in(0), &x = ctx.in(1), &w = ctx.in(2);
  const k::ConvGeom g = conv_grad_geometry(ctx);
  const ConvGrads<T> left = conv_grad_served(ctx, g, x.dtype(), conv_grad_outputs<T>(ctx));
  if (left.done()) return;
  // The im2col fallback overwrites every element of the gradients it is given.
  k::conv_grad(g, dy.data<T>(), x.data<T>(), w.data<T>(), left.dx, left.dw, left.db, x.dim(0),
               x.dim(1), w.dim(0), plan::params<plan::WindowParams>(ctx.step()).group());
}

// bf16 ConvGrad on a CPU with bf16 arithmetic: oneDNN in bf16 (fp32 accumulation, each
// gradient rounded once), no widening. False where it does not serve every gradient (then the
// op runs widened, writing all of them again).
bool low_conv_grad(OpContext& ctx) {
  const Tensor &dy = ctx.in(0), &x = ctx.in(1), &w = ctx.in(2);
  const DType bf16 = DType::kBFloat16;
  if (dy.dtype() != bf16 || x.dtype() != bf16 || w.dtype() != bf16 || !k::dnnl_bf16_native())
    return false;
  const k::ConvGeom g = conv_grad_geometry(ctx);
  return conv_grad_served(ctx, g, bf16, conv_grad_outputs<BFloat16>(ctx)).done();
}

template <typename T, bool max>
void pool_grad(OpContext& ctx) {
  const Tensor &dy = ctx.in(0), &x = ctx.in(1);
  const k::ConvGeom g = forward_geometry(ctx, dy, x, {}, x.dim(1));
  void* dx = ctx.output(0, x.dtype(), x.shape()).raw();
  const int64_t planes = x.dim(0) * x.dim(1);
  if (x.numel() == 0) return;
  // The CUDA kernels' CPU twin (kernels/twin/pool.h): the same sums in the same order.
  if constexpr (max) {
    kernels::twin::max_pool_grad(x.dtype(), g, planes, x.raw(), dy.raw(), dx);
  } else {
    kernels::twin::average_pool_grad(
        x.dtype(), g, planes, dy.raw(), dx,
        plan::params<plan::WindowParams>(ctx.step()).count_include_pad());
  }
}

// 16-bit operands as they are: the twin computes in fp32 and rounds each dX once.
template <bool max>
void pool_grad_op(OpContext& ctx) {
  if (!nn::dispatch<float, double, Half, BFloat16>(
          ctx.in(1).dtype(), [&](auto tag) { pool_grad<decltype(tag), max>(ctx); })) {
    ctx.unsupported_dtype(1);
  }
}

void conv_grad_op(OpContext& ctx) {
  nn::dispatch_float(ctx, [&](auto tag) { conv_grad<decltype(tag)>(ctx); });
}

}  // namespace

void register_grad_ops(OpRegistry& r) {
  r.add(
      "ConvGrad",
      [](OpContext& ctx) {
        if (!low_conv_grad(ctx)) nn::run_widened(ctx, conv_grad_op, {1, 2, 2});
      },
      "ampc");
  r.add("MaxPoolGrad", pool_grad_op<true>, "ampc");
  r.add("AveragePoolGrad", pool_grad_op<false>, "ampc");
}

}  // namespace ampc::rt::cpu
