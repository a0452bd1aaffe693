// Binary arithmetic with numpy broadcasting: Add, Sub, Mul, Div, Mod, Pow, PRelu.
#include <cmath>
#include <functional>
#include <type_traits>

#include "runtime/cpu/ops/elementwise_common.h"

namespace ampc::rt::cpu {
namespace {

using kc::kNumeric;
using kc::opmath_t;
using kc::Shape;

// Integer +, -, * wrap around as numpy's do: computed in an unsigned type (where C++ defines
// the wrap) at least as wide as unsigned int, so small types are not promoted to signed int.
template <typename V, typename Op>
V wrapping(V a, V b, Op op) {
  if constexpr (std::is_integral_v<V>) {
    using U = std::conditional_t<(sizeof(V) < sizeof(unsigned)), unsigned, std::make_unsigned_t<V>>;
    return static_cast<V>(op(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return op(a, b);
  }
}

// Integer division truncates towards zero as in C; x / 0 gives 0 instead of a crash.
template <typename V>
V int_div(V a, V b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<V>) {
    if (b == -1) return wrapping(V(0), a, std::minus<>());  // also avoids the INT_MIN / -1 trap
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
    if (e & 1) result = wrapping(result, a, std::multiplies<>());
    a = wrapping(a, a, std::multiplies<>());
    e >>= 1;
  }
  return result;
}

// Pow: the exponent may have another type. It is converted to the base's opmath type for
// float bases, and to int64 or double for integer bases; the result has the base's type.
// Bases: the float types and signed integers (the spec's T is float and int32/int64).
void pow_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& y = ctx.in(1);
  const Shape y_shape = second_operand_shape(ctx);
  const auto shape = broadcast_or_fail(ctx, {x.shape(), y_shape});
  if (!kc::visit_dtype<kNumeric>(y.dtype(), [](auto) {})) ctx.unsupported_dtype(1);
  dispatch<kc::kSignedNumeric>(ctx, 0, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = opmath_t<T>;
    using W = std::conditional_t<std::is_floating_point_v<M>, M, int64_t>;
    Tensor& out = ctx.output(0, x.dtype(), shape);
    if constexpr (std::is_integral_v<M>) {
      if (is_float(y.dtype())) {
        const Tensor e = cast_tensor(ctx, y, DType::kFloat64);
        kc::binary_map(x.data<T>(), x.shape(), e.data<double>(), y_shape, out.data<T>(), shape,
                       [](M a, double b) { return std::pow(static_cast<double>(a), b); });
        return;
      }
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
  add_binary<kNumeric>(r, "Add", [](auto a, auto b) { return wrapping(a, b, std::plus<>()); });
  add_binary<kNumeric>(r, "Sub", [](auto a, auto b) { return wrapping(a, b, std::minus<>()); });
  add_binary<kNumeric>(r, "Mul",
                       [](auto a, auto b) { return wrapping(a, b, std::multiplies<>()); });
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
  r.add("PRelu", prelu_op);
}

}  // namespace

void register_elementwise_binary(OpRegistry& r) {
  register_arithmetic(r);
}

}  // namespace ampc::rt::cpu
