// Softmax, LogSoftmax and Hardmax, on the rows their typed parameters give (legalize settles
// the opset's 2-D coercion and the axis; runtime/plan/step_params.h the row shape).
// Softmax and LogSoftmax run the CUDA kernels' host side (kernels/twin/softmax.h), so the CPU
// op's bits are the GPU kernel's.
#include <algorithm>

#include "kernels/shared/kernel_args.h"
#include "kernels/twin/softmax.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu::nn {
namespace {

enum class Kind { kSoftmax, kLogSoftmax, kHardmax };

// The first maximum of each [n] column marked with 1 (T has no 16-bit form here: widened).
template <typename T>
void hardmax(const T* x, const plan::RowShape& s, T* y) {
  std::fill(y, y + s.outer * s.n * s.inner, T(0));
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const T* col = x + o * s.n * s.inner + i;
      int64_t arg = 0;
      for (int64_t r = 1; r < s.n; ++r) arg = col[r * s.inner] > col[arg * s.inner] ? r : arg;
      if (s.n > 0) y[o * s.n * s.inner + arg * s.inner + i] = T(1);
    }
  }
}

template <Kind kind, typename T>
void softmax(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  const plan::RowShape s =
      plan::row_shape(plan::params<plan::RowwiseParams>(ctx.step()), x.shape());
  if (y.numel() == 0) return;
  if constexpr (kind == Kind::kHardmax) {
    hardmax(x.data<T>(), s, y.data<T>());
  } else {
    kernels::twin::softmax(x.dtype(), x.data<T>(), y.data<T>(), s.outer, s.n, s.inner,
                           kind == Kind::kLogSoftmax);
  }
}

template <Kind kind>
void softmax_op(OpContext& ctx) {
  dispatch_float(ctx, [&](auto tag) { softmax<kind, decltype(tag)>(ctx); });
}

// ampc.SoftmaxGrad(dY, Y) -> dX: the backward (passes/autodiff/rules_softmax.cc), the CUDA
// kernel's twin; Y and dX of one type (f64 in double), dY of Y's or, with f32 Y, 16-bit read
// widened (passes/widened_row_grads.h); the rows of the forward's axis.
void softmax_grad(OpContext& ctx) {
  const Tensor &dy = ctx.in(0), &y = ctx.in(1);
  if (!is_float(y.dtype())) ctx.fail("Y " + y.type_str() + " is not a float tensor");
  if (!kernels::shared::grad_input_fits(dy.dtype(), y.dtype()) || dy.shape() != y.shape())
    ctx.fail("dY " + dy.type_str() + " does not match Y " + y.type_str());
  const plan::RowwiseParams& p = plan::params<plan::RowwiseParams>(ctx.step());
  const plan::RowShape s = plan::row_shape(p, y.shape());
  Tensor& dx = ctx.output_for_overwrite(0, y.dtype(), y.shape());
  kernels::twin::softmax_grad(y.dtype(), dy.dtype(), y.raw(), dy.raw(), dx.raw(), s.outer, s.n,
                              s.inner, p.kind() == plan::RowwiseParams::LOG_SOFTMAX);
}

}  // namespace

void register_softmax_ops(OpRegistry& r) {
  r.add("SoftmaxGrad", softmax_grad, "ampc");
  add_widened(r, "Softmax", softmax_op<Kind::kSoftmax>);
  add_widened(r, "LogSoftmax", softmax_op<Kind::kLogSoftmax>);
  add_widened(r, "Hardmax", softmax_op<Kind::kHardmax>);
}

}  // namespace ampc::rt::cpu::nn
