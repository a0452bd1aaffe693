// Gradient ops of ampc's "ampc" domain (their schemas: passes/autodiff/ampc_schemas.h):
// ConvGrad, MaxPoolGrad and AveragePoolGrad. They take the forward op's window (WindowParams) and
// compute in the input type (float or double; 16-bit inputs widened).
#include <algorithm>
#include <type_traits>

#include "kernels/cpu/conv_grad.h"
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

// dx, dw and db (each may be null) through oneDNN, every operand of element type t; false
// when oneDNN cannot serve it (then the outputs are left to the caller's fallback).
bool conv_grad_dnnl(const OpContext& ctx, const k::ConvGeom& g, DType t, void* dx, void* dw,
                    void* db) {
  const Tensor &dy = ctx.in(0), &x = ctx.in(1), &w = ctx.in(2);
  k::DnnlConv p =
      nn::dnnl_conv_problem(g, static_cast<size_t>(x.rank() - 2), x.dim(0), x.dim(1), w.dim(0),
                            plan::params<plan::WindowParams>(ctx.step()).group());
  p.x_type = p.w_type = p.y_type = p.bias_type = t;
  if (dx && !k::dnnl_conv_backward_data(p, dy.raw(), w.raw(), dx)) return false;
  if (dw) return k::dnnl_conv_backward_weights(p, dy.raw(), x.raw(), dw, db);
  return db == nullptr;
}

template <typename T>
void conv_grad(OpContext& ctx) {
  const Tensor &dy = ctx.in(0), &x = ctx.in(1), &w = ctx.in(2);
  const k::ConvGeom g = conv_grad_geometry(ctx);
  // oneDNN writes every element of each gradient; the fallback starts from zeros.
  auto out = [&](int i, const std::vector<int64_t>& shape) {
    if (!ctx.has_output(i)) return static_cast<T*>(nullptr);
    Tensor& t = std::is_same_v<T, float> ? ctx.output_for_overwrite(i, x.dtype(), shape)
                                         : ctx.output(i, x.dtype(), shape);
    return t.template data<T>();
  };
  T* dx = out(0, x.shape());
  T* dw = out(1, w.shape());
  T* db = out(2, {w.dim(0)});
  if constexpr (std::is_same_v<T, float>) {
    if (conv_grad_dnnl(ctx, g, DType::kFloat32, dx, dw, db)) return;
    if (dx) std::fill(dx, dx + x.numel(), 0.0f);
    if (dw) std::fill(dw, dw + w.numel(), 0.0f);
    if (db) std::fill(db, db + w.dim(0), 0.0f);
  }
  k::conv_grad(g, dy.data<T>(), x.data<T>(), w.data<T>(), dx, dw, db, x.dim(0), x.dim(1), w.dim(0),
               plan::params<plan::WindowParams>(ctx.step()).group());
}

// bf16 ConvGrad on a CPU with bf16 arithmetic: oneDNN in bf16 (fp32 accumulation, each
// gradient rounded once), no widening. False where it does not apply (then run widened).
bool low_conv_grad(OpContext& ctx) {
  const Tensor &dy = ctx.in(0), &x = ctx.in(1), &w = ctx.in(2);
  const DType bf16 = DType::kBFloat16;
  if (dy.dtype() != bf16 || x.dtype() != bf16 || w.dtype() != bf16 || !k::dnnl_bf16_native())
    return false;
  const k::ConvGeom g = conv_grad_geometry(ctx);
  if (x.numel() == 0 || dy.numel() == 0) return false;
  // Into the gradients' places: oneDNN writes every element (the widened fallback, when it
  // refuses, writes them again from zeros).
  auto out = [&](int i, const std::vector<int64_t>& shape) {
    return ctx.has_output(i) ? ctx.output_for_overwrite(i, bf16, shape).raw() : nullptr;
  };
  void* dx = out(0, x.shape());
  void* dw = out(1, w.shape());
  void* db = out(2, {w.dim(0)});
  return conv_grad_dnnl(ctx, g, bf16, dx, dw, db);
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

template <bool max>
void pool_grad_op(OpContext& ctx) {
  nn::dispatch_float(ctx, [&](auto tag) { pool_grad<decltype(tag), max>(ctx); });
}

void conv_grad_op(OpContext& ctx) {
  nn::dispatch_float(ctx, [&](auto tag) { conv_grad<decltype(tag)>(ctx); });
}

}  // namespace

void register_grad_ops(OpRegistry& r) {
  auto add = [&r](const char* name, nn::OpFn fn, std::vector<int> out_like) {
    r.add(
        name, [fn, out_like](OpContext& ctx) { nn::run_widened(ctx, fn, out_like); }, "ampc");
  };
  r.add(
      "ConvGrad",
      [](OpContext& ctx) {
        if (!low_conv_grad(ctx)) nn::run_widened(ctx, conv_grad_op, {1, 2, 2});
      },
      "ampc");
  add("MaxPoolGrad", pool_grad_op<true>, {1});
  add("AveragePoolGrad", pool_grad_op<false>, {1});
}

}  // namespace ampc::rt::cpu
