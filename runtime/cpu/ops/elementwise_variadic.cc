// Variadic elementwise operators over any number of broadcast inputs: Sum, Mean, Max, Min.
#include <cmath>
#include <type_traits>
#include <vector>

#include "runtime/cpu/ops/elementwise_common.h"

namespace ampc::rt::cpu {
namespace {

using kc::opmath_t;
using kc::Shape;

// NaN-propagating max/min (numpy maximum/minimum).
template <typename V>
V max_of(V a, V b) {
  if constexpr (std::is_floating_point_v<V>) {
    if (std::isnan(b)) return b;
  }
  return a < b ? b : a;
}
template <typename V>
V min_of(V a, V b) {
  if constexpr (std::is_floating_point_v<V>) {
    if (std::isnan(b)) return b;
  }
  return b < a ? b : a;
}

// Sum, Mean, Max, Min over any number of inputs: accumulated in opmath, rounded once.
template <unsigned Set, typename F>
void variadic_op(OpContext& ctx, F f, bool mean) {
  std::vector<const Tensor*> inputs;
  std::vector<Shape> shapes;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    inputs.push_back(&ctx.in(i));
    shapes.push_back(ctx.in(i).shape());
    require_same_dtype(ctx, 0, i);
  }
  if (inputs.empty()) ctx.fail("needs at least one input");
  const auto shape = broadcast_or_fail(ctx, shapes);
  dispatch<Set>(ctx, 0, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = opmath_t<T>;
    std::vector<M> acc(static_cast<size_t>(numel_of(shape)));
    const Tensor& first = *inputs[0];
    kc::binary_map(first.data<T>(), first.shape(), first.data<T>(), first.shape(), acc.data(),
                   shape, [](M a, M) { return a; });
    for (size_t i = 1; i < inputs.size(); ++i) {
      kc::binary_map(acc.data(), shape, inputs[i]->data<T>(), inputs[i]->shape(), acc.data(), shape,
                     f);
    }
    Tensor& y = ctx.output(0, first.dtype(), shape);
    const M n = static_cast<M>(inputs.size());
    if (mean) {
      kc::unary_map(acc.data(), y.data<T>(), y.numel(), [n](M v) { return v / n; });
    } else {
      kc::unary_map(acc.data(), y.data<T>(), y.numel(), [](M v) { return v; });
    }
  });
}

}  // namespace

void register_elementwise_variadic(OpRegistry& r) {
  auto add = [](auto a, auto b) { return a + b; };
  auto max = [](auto a, auto b) { return max_of(a, b); };
  auto min = [](auto a, auto b) { return min_of(a, b); };
  r.add("Sum", [add](OpContext& ctx) { variadic_op<kc::kFloats>(ctx, add, false); });
  r.add("Mean", [add](OpContext& ctx) { variadic_op<kc::kFloats>(ctx, add, true); });
  r.add("Max", [max](OpContext& ctx) { variadic_op<kc::kNumeric>(ctx, max, false); });
  r.add("Min", [min](OpContext& ctx) { variadic_op<kc::kNumeric>(ctx, min, false); });
}

}  // namespace ampc::rt::cpu
