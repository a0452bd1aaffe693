// Softmax, LogSoftmax and Hardmax. Before opset 13 the input is coerced to 2-D at `axis`
// (default 1) and each row normalised; from opset 13 one axis (default -1) is normalised.
// Softmax and LogSoftmax run the CUDA kernels' host side (kernels/twin/softmax.h), so the CPU
// op's bits are the GPU kernel's.
#include <algorithm>

#include "kernels/twin/softmax.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/nn_util.h"

namespace ampc::rt::cpu::nn {
namespace {

enum class Kind { kSoftmax, kLogSoftmax, kHardmax };

// x viewed as [outer, n, inner], normalised along n.
struct SoftmaxShape {
  int64_t outer, n, inner;
};

SoftmaxShape softmax_shape(OpContext& ctx, const std::vector<int64_t>& dims) {
  const bool coerce_2d = ctx.opset() < 13;
  const int64_t rank = static_cast<int64_t>(dims.size());
  // Coerced to 2-D, axis may also be rank: rows of one element.
  int64_t axis_attr = ctx.attr_int("axis", coerce_2d ? 1 : -1);
  if (coerce_2d && axis_attr < 0) axis_attr += rank;
  const size_t axis = static_cast<size_t>(
      coerce_2d && axis_attr == rank ? rank : normalize_axis(ctx, axis_attr, rank));
  return {product(dims, 0, axis), coerce_2d ? product(dims, axis, dims.size()) : dims[axis],
          coerce_2d ? 1 : product(dims, axis + 1, dims.size())};
}

// The first maximum of each [n] column marked with 1 (T has no 16-bit form here: widened).
template <typename T>
void hardmax(const T* x, const SoftmaxShape& s, T* y) {
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
  if (x.rank() == 0) {  // a single value
    y.data<T>()[0] = kind == Kind::kLogSoftmax ? T(0) : T(1);
    return;
  }
  const SoftmaxShape s = softmax_shape(ctx, x.shape());
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

}  // namespace

void register_softmax_ops(OpRegistry& r) {
  add_widened(r, "Softmax", softmax_op<Kind::kSoftmax>);
  add_widened(r, "LogSoftmax", softmax_op<Kind::kLogSoftmax>);
  add_widened(r, "Hardmax", softmax_op<Kind::kHardmax>);
}

}  // namespace ampc::rt::cpu::nn
