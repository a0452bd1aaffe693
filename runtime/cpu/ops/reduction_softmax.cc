// Softmax, LogSoftmax and Hardmax. Before opset 13 the input is coerced to 2-D at `axis`
// (default 1) and each row normalised; from opset 13 one axis (default -1) is normalised.
#include "kernels/cpu/softmax.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/nn_util.h"

namespace ampc::rt::cpu::nn {
namespace {

namespace k = kernels::cpu;

template <k::SoftmaxKind kind, typename T>
void softmax(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto& dims = x.shape();
  const bool coerce_2d = ctx.opset() < 13;
  const int64_t rank = x.rank();
  Tensor& y = ctx.output(0, x.dtype(), dims);
  if (rank == 0) {  // a single value
    y.data<T>()[0] = kind == k::SoftmaxKind::kLogSoftmax ? T(0) : T(1);
    return;
  }
  // Coerced to 2-D, axis may also be rank: rows of one element.
  int64_t axis_attr = ctx.attr_int("axis", coerce_2d ? 1 : -1);
  if (coerce_2d && axis_attr < 0) axis_attr += rank;
  const size_t axis = static_cast<size_t>(
      coerce_2d && axis_attr == rank ? rank : normalize_axis(ctx, axis_attr, rank));
  const int64_t outer = product(dims, 0, axis);
  const int64_t n = coerce_2d ? product(dims, axis, dims.size()) : dims[axis];
  const int64_t inner = coerce_2d ? 1 : product(dims, axis + 1, dims.size());
  if (y.numel() == 0) return;
  k::softmax(kind, x.data<T>(), outer, n, inner, y.data<T>());
}

template <k::SoftmaxKind kind>
void softmax_op(OpContext& ctx) {
  dispatch_float(ctx, [&](auto tag) { softmax<kind, decltype(tag)>(ctx); });
}

}  // namespace

void register_softmax_ops(OpRegistry& r) {
  add_widened(r, "Softmax", softmax_op<k::SoftmaxKind::kSoftmax>);
  add_widened(r, "LogSoftmax", softmax_op<k::SoftmaxKind::kLogSoftmax>);
  add_widened(r, "Hardmax", softmax_op<k::SoftmaxKind::kHardmax>);
}

}  // namespace ampc::rt::cpu::nn
