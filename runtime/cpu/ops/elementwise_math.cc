// Unary math and activation functions: y = f(x) elementwise, computed in opmath (fp32 for the
// 16-bit float types) and rounded once at the store.
#include <cmath>
#include <type_traits>

#include "kernels/shared/float_math.h"
#include "ops/ampc_forms.h"
#include "runtime/cpu/ops/elementwise_common.h"

namespace ampc::rt::cpu {
namespace {

// exp, erf and tanh in fp32 (also the 16-bit types' opmath) are the host JIT's own functions
// (kernels/shared/float_math.h), so fused kernels give these ops' results bit for bit; fp64
// goes to the C library.
template <typename V, typename F32, typename F64>
V fp32_shared(V x, F32 f32, F64 f64) {
  if constexpr (std::is_same_v<V, float>) {
    return f32(x);
  } else {
    return f64(x);
  }
}

template <typename V>
V exp_of(V x) {
  return fp32_shared(
      x, [](float v) { return kernels::fmath::exp_f32(v); }, [](auto v) { return std::exp(v); });
}

template <typename V>
V erf_of(V x) {
  return fp32_shared(
      x, [](float v) { return kernels::fmath::erf_f32(v); }, [](auto v) { return std::erf(v); });
}

template <typename V>
V tanh_of(V x) {
  return fp32_shared(
      x, [](float v) { return kernels::fmath::tanh_f32(v); }, [](auto v) { return std::tanh(v); });
}

using kc::kFloats;
using kc::kNumeric;
using kc::kSignedNumeric;

template <unsigned Set, typename F>
void add_unary(OpRegistry& r, const char* name, F f) {
  r.add(name, [f](OpContext& ctx) { unary_op<Set>(ctx, f); });
}

void register_math(OpRegistry& r) {
  add_unary<kSignedNumeric>(r, "Neg", [](auto x) { return -x; });
  add_unary<kNumeric>(r, "Abs", [](auto x) {
    using V = decltype(x);
    if constexpr (std::is_floating_point_v<V>) {
      return std::abs(x);
    } else if constexpr (std::is_unsigned_v<V>) {
      return x;
    } else {
      return x < 0 ? V(-x) : x;
    }
  });
  add_unary<kNumeric>(r, "Sign", [](auto x) {
    using V = decltype(x);
    if constexpr (std::is_floating_point_v<V>) {
      if (std::isnan(x)) return x;
    }
    if constexpr (std::is_unsigned_v<V>) {
      return V(x != 0);
    } else {
      return V((V(0) < x) - (x < V(0)));
    }
  });
  add_unary<kFloats>(r, "Sqrt", [](auto x) { return std::sqrt(x); });
  add_unary<kFloats>(r, "Exp", [](auto x) { return exp_of(x); });
  add_unary<kFloats>(r, "Log", [](auto x) { return std::log(x); });
  add_unary<kFloats>(r, "Reciprocal", [](auto x) { return decltype(x)(1) / x; });
  add_unary<kFloats>(r, "Floor", [](auto x) { return std::floor(x); });
  add_unary<kFloats>(r, "Ceil", [](auto x) { return std::ceil(x); });
  add_unary<kFloats>(r, "Round", [](auto x) { return std::nearbyint(x); });  // half to even
  add_unary<kFloats>(r, "Erf", [](auto x) { return erf_of(x); });
  add_unary<kFloats>(r, "Tanh", [](auto x) { return tanh_of(x); });
  add_unary<kFloats>(r, "Sin", [](auto x) { return std::sin(x); });
  add_unary<kFloats>(r, "Cos", [](auto x) { return std::cos(x); });
  add_unary<kFloats>(r, "Tan", [](auto x) { return std::tan(x); });
  add_unary<kFloats>(r, "Asin", [](auto x) { return std::asin(x); });
  add_unary<kFloats>(r, "Acos", [](auto x) { return std::acos(x); });
  add_unary<kFloats>(r, "Atan", [](auto x) { return std::atan(x); });
  add_unary<kFloats>(r, "Sinh", [](auto x) { return std::sinh(x); });
  add_unary<kFloats>(r, "Cosh", [](auto x) { return std::cosh(x); });
  add_unary<kFloats>(r, "Asinh", [](auto x) { return std::asinh(x); });
  add_unary<kFloats>(r, "Acosh", [](auto x) { return std::acosh(x); });
  add_unary<kFloats>(r, "Atanh", [](auto x) { return std::atanh(x); });
}

void register_activations(OpRegistry& r) {
  add_unary<kFloats>(r, "Sigmoid", [](auto x) { return decltype(x)(1) / (1 + exp_of(-x)); });
  // Relu keeps NaN (as torch does); integer types are allowed from opset 14.
  add_unary<kSignedNumeric>(r, "Relu",
                            [](auto x) { return x < decltype(x)(0) ? decltype(x)(0) : x; });
  add_unary<kFloats>(r, "Softsign", [](auto x) { return x / (1 + std::abs(x)); });
  add_unary<kFloats>(r, "Softplus", [](auto x) {
    return x > 0 ? x + std::log1p(exp_of(-x)) : std::log1p(exp_of(x));
  });
  add_unary<kFloats>(r, "HardSwish", [](auto x) {
    using V = decltype(x);
    return x * std::max(V(0), std::min(V(1), x / V(6) + V(0.5)));
  });
  r.add("LeakyRelu", [](OpContext& ctx) {
    const float alpha = ctx.attr_float("alpha", 0.01f);
    unary_op<kFloats>(ctx, [alpha](auto x) { return x < 0 ? decltype(x)(alpha) * x : x; });
  });
  r.add("Elu", [](OpContext& ctx) {
    const float alpha = ctx.attr_float("alpha", 1.0f);
    unary_op<kFloats>(ctx,
                      [alpha](auto x) { return x < 0 ? decltype(x)(alpha) * std::expm1(x) : x; });
  });
  r.add("Selu", [](OpContext& ctx) {
    const float alpha = ctx.attr_float("alpha", 1.67326319217681884765625f);
    const float gamma = ctx.attr_float("gamma", 1.05070102214813232421875f);
    unary_op<kFloats>(ctx, [alpha, gamma](auto x) {
      using V = decltype(x);
      return x <= 0 ? V(gamma) * (V(alpha) * exp_of(x) - V(alpha)) : V(gamma) * x;
    });
  });
  r.add("Celu", [](OpContext& ctx) {
    const float alpha = ctx.attr_float("alpha", 1.0f);
    unary_op<kFloats>(ctx, [alpha](auto x) {
      using V = decltype(x);
      return std::max(V(0), x) + std::min(V(0), V(alpha) * std::expm1(x / V(alpha)));
    });
  });
  r.add("ThresholdedRelu", [](OpContext& ctx) {
    const float alpha = ctx.attr_float("alpha", 1.0f);
    unary_op<kFloats>(ctx, [alpha](auto x) { return x > decltype(x)(alpha) ? x : decltype(x)(0); });
  });
  r.add("HardSigmoid", [](OpContext& ctx) {
    const float alpha = ctx.attr_float("alpha", 0.2f), beta = ctx.attr_float("beta", 0.5f);
    unary_op<kFloats>(ctx, [alpha, beta](auto x) {
      using V = decltype(x);
      return std::max(V(0), std::min(V(1), V(alpha) * x + V(beta)));
    });
  });
  r.add("Shrink", [](OpContext& ctx) {
    const double lambd = ctx.attr_float("lambd", 0.5f), bias = ctx.attr_float("bias", 0.0f);
    unary_op<kNumeric>(ctx, [lambd, bias](auto x) {
      const double v = static_cast<double>(x);
      return v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0);
    });
  });
}

// Float predicates with a bool output.
template <typename F>
void predicate_op(OpContext& ctx, F f) {
  const Tensor& x = ctx.in(0);
  dispatch<kFloats>(ctx, 0, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor& y = ctx.output(0, DType::kBool, x.shape());
    kc::unary_map(x.data<T>(), y.data<bool>(), x.numel(), f);
  });
}

void register_predicates(OpRegistry& r) {
  r.add("IsNaN", [](OpContext& ctx) { predicate_op(ctx, [](auto x) { return std::isnan(x); }); });
  r.add("IsInf", [](OpContext& ctx) {
    const bool pos = ctx.attr_int("detect_positive", 1) != 0;
    const bool neg = ctx.attr_int("detect_negative", 1) != 0;
    predicate_op(ctx, [pos, neg](auto x) { return std::isinf(x) && (x > 0 ? pos : neg); });
  });
  r.add("Not", [](OpContext& ctx) { unary_op<kc::kBoolType>(ctx, [](bool x) { return !x; }); });
}

}  // namespace

void register_elementwise_math(OpRegistry& r) {
  register_math(r);
  register_activations(r);
  register_predicates(r);
  // The activations' ampc forms (ops/ampc_forms.h) run as the ONNX ops: float types of every
  // width, 16-bit ones computed in fp32 and rounded once.
  for (std::string_view op : ops::ampc_activation_forms())
    r.add(std::string(op), *r.find(std::string(op), ""), "ampc");
}

}  // namespace ampc::rt::cpu
