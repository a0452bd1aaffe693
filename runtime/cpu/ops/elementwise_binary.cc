// Binary and variadic elementwise operators with numpy broadcasting: arithmetic, comparisons,
// logic, bit shifts.
#include <cmath>
#include <type_traits>

#include "runtime/cpu/ops/elementwise_common.h"

namespace ampc::rt::cpu {
namespace {

using kc::kBoolType;
using kc::kFloats;
using kc::kNumeric;
using kc::opmath_t;
using kc::Shape;

template <unsigned Set, bool OutBool = false, typename F>
void add_binary(OpRegistry& r, const char* name, F f) {
  r.add(name, [f](OpContext& ctx) { binary_op<Set, OutBool>(ctx, f); });
}

// Integer division truncates towards zero as in C; x / 0 gives 0 instead of a crash.
template <typename V>
V int_div(V a, V b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<V>) {
    if (b == -1) return static_cast<V>(-a);  // also avoids the INT_MIN / -1 trap
  }
  return static_cast<V>(a / b);
}

template <typename V>
V mod(V a, V b, bool c_fmod) {
  if constexpr (std::is_floating_point_v<V>) {
    V m = std::fmod(a, b);
    if (!c_fmod && m != 0 && ((m < 0) != (b < 0))) m += b;
    return m;
  } else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<V>) {
      if (b == -1) return 0;
      V m = static_cast<V>(a % b);
      if (!c_fmod && m != 0 && ((m < 0) != (b < 0))) m = static_cast<V>(m + b);
      return m;
    } else {
      return static_cast<V>(a % b);
    }
  }
}

// Integer power by squaring; negative exponents give the integer part of 1 / a^|e|.
template <typename V>
V int_pow(V a, int64_t e) {
  if (e < 0) {
    if constexpr (std::is_signed_v<V>) {
      if (a == -1) return (e & 1) ? -1 : 1;
    }
    return a == 1 ? 1 : 0;
  }
  V result = 1;
  while (e) {
    if (e & 1) result = static_cast<V>(result * a);
    a = static_cast<V>(a * a);
    e >>= 1;
  }
  return result;
}

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

// Pow: the exponent may have another type. It is converted to the base's opmath type for
// float bases, and to int64 or double for integer bases; the result has the base's type.
void pow_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& y = ctx.in(1);
  const Shape y_shape = second_operand_shape(ctx);
  const auto shape = broadcast_or_fail(ctx, {x.shape(), y_shape});
  if (!kc::visit_dtype<kNumeric>(y.dtype(), [](auto) {})) ctx.unsupported_dtype(1);
  dispatch<kNumeric>(ctx, 0, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = opmath_t<T>;
    using W = std::conditional_t<std::is_floating_point_v<M>, M, int64_t>;
    Tensor& out = ctx.output(0, x.dtype(), shape);
    if (std::is_integral_v<M> && is_float(y.dtype())) {
      const Tensor e = cast_tensor(ctx, y, DType::kFloat64);
      kc::binary_map(x.data<T>(), x.shape(), e.data<double>(), y_shape, out.data<T>(), shape,
                     [](M a, double b) { return std::pow(static_cast<double>(a), b); });
      return;
    }
    const Tensor e = cast_tensor(ctx, y, dtype_of<W>());
    kc::binary_map(x.data<T>(), x.shape(), e.data<W>(), y_shape, out.data<T>(), shape,
                   [](M a, W b) {
                     if constexpr (std::is_floating_point_v<M>) {
                       return std::pow(a, b);
                     } else {
                       return int_pow<M>(a, b);
                     }
                   });
  });
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

// PRelu: the slope broadcasts to the shape of X (unidirectionally). Before opset 7 a 1-D
// slope holds one value per channel (axis 1).
void prelu_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  Shape slope_shape = ctx.in(1).shape();
  if (ctx.opset() < 7 && slope_shape.size() == 1 && x.rank() >= 2 && slope_shape[0] == x.dim(1)) {
    slope_shape.resize(static_cast<size_t>(x.rank() - 1), 1);
  }
  require_same_dtype(ctx, 0, 1);
  if (kc::broadcast_shapes({x.shape(), slope_shape}) != x.shape()) {
    ctx.fail("slope of shape " + shape_str(slope_shape) + " does not broadcast to X " +
             shape_str(x.shape()));
  }
  dispatch<kc::kSignedNumeric>(ctx, 0, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor& y = ctx.output(0, x.dtype(), x.shape());
    kc::binary_map(x.data<T>(), x.shape(), ctx.in(1).data<T>(), slope_shape, y.data<T>(), x.shape(),
                   [](auto a, auto s) { return a < 0 ? decltype(a)(s * a) : a; });
  });
}

void register_arithmetic(OpRegistry& r) {
  add_binary<kNumeric>(r, "Add", [](auto a, auto b) { return a + b; });
  add_binary<kNumeric>(r, "Sub", [](auto a, auto b) { return a - b; });
  add_binary<kNumeric>(r, "Mul", [](auto a, auto b) { return a * b; });
  add_binary<kNumeric>(r, "Div", [](auto a, auto b) {
    if constexpr (std::is_floating_point_v<decltype(a)>) {
      return a / b;
    } else {
      return int_div(a, b);
    }
  });
  r.add("Mod", [](OpContext& ctx) {
    const bool c_fmod = ctx.attr_int("fmod", 0) != 0;
    binary_op<kNumeric>(ctx, [c_fmod](auto a, auto b) { return mod(a, b, c_fmod); });
  });
  r.add("Pow", pow_op);
  r.add("Sum", [](OpContext& ctx) {
    variadic_op<kFloats>(
        ctx, [](auto a, auto b) { return a + b; }, false);
  });
  r.add("Mean", [](OpContext& ctx) {
    variadic_op<kFloats>(
        ctx, [](auto a, auto b) { return a + b; }, true);
  });
  r.add("Max", [](OpContext& ctx) {
    variadic_op<kNumeric>(
        ctx, [](auto a, auto b) { return max_of(a, b); }, false);
  });
  r.add("Min", [](OpContext& ctx) {
    variadic_op<kNumeric>(
        ctx, [](auto a, auto b) { return min_of(a, b); }, false);
  });
  r.add("PRelu", prelu_op);
}

void register_logic(OpRegistry& r) {
  add_binary<kc::kAllTypes, true>(r, "Equal", [](auto a, auto b) { return a == b; });
  add_binary<kNumeric, true>(r, "Less", [](auto a, auto b) { return a < b; });
  add_binary<kNumeric, true>(r, "LessOrEqual", [](auto a, auto b) { return a <= b; });
  add_binary<kNumeric, true>(r, "Greater", [](auto a, auto b) { return a > b; });
  add_binary<kNumeric, true>(r, "GreaterOrEqual", [](auto a, auto b) { return a >= b; });
  add_binary<kBoolType>(r, "And", [](bool a, bool b) { return a && b; });
  add_binary<kBoolType>(r, "Or", [](bool a, bool b) { return a || b; });
  add_binary<kBoolType>(r, "Xor", [](bool a, bool b) { return a != b; });
  r.add("BitShift", [](OpContext& ctx) {
    const std::string dir = ctx.attr_string("direction", "");
    if (dir != "LEFT" && dir != "RIGHT") {
      ctx.fail("attribute 'direction' value '" + dir + "' is not supported");
    }
    const bool left = dir == "LEFT";
    binary_op<kc::kUnsigned>(ctx, [left](auto a, auto b) {
      using V = decltype(a);
      if (b >= sizeof(V) * 8) return V(0);
      return static_cast<V>(left ? a << b : a >> b);
    });
  });
}

}  // namespace

void register_elementwise_binary(OpRegistry& r) {
  register_arithmetic(r);
  register_logic(r);
}

}  // namespace ampc::rt::cpu
