// Gradient ops of ampc's "ampc" domain (their schemas: passes/autodiff/ampc_schemas.h):
// ConvGrad, MaxPoolGrad and AveragePoolGrad. They take the forward op's attributes and
// compute in the input type (float or double; 16-bit inputs widened).
#include "kernels/cpu/conv_grad.h"
#include "kernels/cpu/pool_grad.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"
#include "runtime/cpu/ops/nn_util.h"

namespace ampc::rt::cpu {
namespace {

namespace k = kernels::cpu;
using nn::check_spatial_rank;
using nn::geom_cols;
using nn::window_geometry;

// The forward op's window geometry for X; fails unless dY has its output shape.
k::ConvGeom forward_geometry(const OpContext& ctx, const Tensor& dy, const Tensor& x,
                             std::vector<int64_t> kernel, int64_t channels, bool pooling) {
  check_spatial_rank(ctx, x.rank());
  const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
  const k::ConvGeom g = window_geometry(ctx, in, std::move(kernel), pooling);
  std::vector<int64_t> shape = {x.dim(0), channels};
  for (int64_t d : geom_cols(g, in.size())) shape.push_back(d);
  if (dy.shape() != shape || dy.dtype() != x.dtype()) {
    ctx.fail("dY " + dy.type_str() + " does not match the forward output for X " + x.type_str());
  }
  return g;
}

template <typename T>
void conv_grad(OpContext& ctx) {
  const Tensor &dy = ctx.in(0), &x = ctx.in(1), &w = ctx.in(2);
  const int64_t group = ctx.attr_int("group", 1);
  if (w.rank() != x.rank() || group <= 0 || x.dim(1) != w.dim(1) * group || w.dim(0) % group) {
    ctx.fail("X " + x.type_str() + " and W " + w.type_str() + " do not fit group " +
             std::to_string(group));
  }
  const std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  const k::ConvGeom g = forward_geometry(ctx, dy, x, kernel, w.dim(0), false);
  auto out = [&](int i, const std::vector<int64_t>& shape) {
    return ctx.has_output(i) ? ctx.output(i, x.dtype(), shape).template data<T>() : nullptr;
  };
  T* dx = out(0, x.shape());
  T* dw = out(1, w.shape());
  T* db = out(2, {w.dim(0)});
  k::conv_grad(g, dy.data<T>(), x.data<T>(), w.data<T>(), dx, dw, db, x.dim(0), x.dim(1), w.dim(0),
               group);
}

template <typename T, bool max>
void pool_grad(OpContext& ctx) {
  const Tensor &dy = ctx.in(0), &x = ctx.in(1);
  if (!ctx.has_attr("kernel_shape")) ctx.fail("attribute 'kernel_shape' is required");
  const k::ConvGeom g = forward_geometry(ctx, dy, x, {}, x.dim(1), true);
  T* dx = ctx.output(0, x.dtype(), x.shape()).template data<T>();
  const int64_t planes = x.dim(0) * x.dim(1);
  if (x.numel() == 0) return;
  if constexpr (max) {
    k::max_pool_grad(g, x.data<T>(), dy.data<T>(), planes, dx);
  } else {
    k::avg_pool_grad(g, dy.data<T>(), planes, dx, ctx.attr_int("count_include_pad", 0) != 0);
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
  add("ConvGrad", conv_grad_op, {1, 2, 2});
  add("MaxPoolGrad", pool_grad_op<true>, {1});
  add("AveragePoolGrad", pool_grad_op<false>, {1});
}

}  // namespace ampc::rt::cpu
