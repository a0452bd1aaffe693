// Per-element math of the integer / bool elementwise kernels and of Cast
// (kernels/cuda/elementwise.cu, kernels/twin/elementwise.cc), with the CPU ops' semantics
// (runtime/cpu/ops/elementwise_binary.cc, elementwise_compare.cc, elementwise_convert.cc and
// kernels/cpu/elementwise_types.h's load / store). Compiled by nvcc and g++.
#pragma once

#include <cstdint>
#include <type_traits>

#include "base/half.h"
#include "kernels/shared/hd.h"
#include "kernels/shared/rowwise_fp.h"

namespace ampc::kernels::shared::ew {

// The binary ops, numbered as kernel_args.h's BinaryOp.
enum Op : int32_t {
  kAdd = 0,
  kSub = 1,
  kMul = 2,
  kDiv = 3,
  kEqual = 4,
  kLess = 5,
  kGreater = 6,
  kLessOrEqual = 7,
  kGreaterOrEqual = 8,
  kAnd = 9,
  kOr = 10,
  kXor = 11,
};

AMPC_HD constexpr bool is_comparison(int32_t op) {
  return op >= kEqual && op <= kGreaterOrEqual;
}
AMPC_HD constexpr bool is_logical(int32_t op) {
  return op >= kAnd;
}

// Integer +, -, * wrap around: computed in an unsigned type at least as wide as unsigned int
// (the CPU op's `wrapping`).
template <typename V>
using WrapType =
    std::conditional_t<(sizeof(V) < sizeof(unsigned)), unsigned, std::make_unsigned_t<V>>;

// Integer division truncating towards zero; x / 0 = 0; x / -1 = -x wrapping (no INT_MIN trap).
template <typename V>
AMPC_HD V int_div(V a, V b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<V>) {
    if (b == -1) return static_cast<V>(WrapType<V>(0) - static_cast<WrapType<V>>(a));
  }
  return static_cast<V>(a / b);
}

// a op b for an arithmetic op (result V) on integer V.
template <int32_t kOp, typename V>
AMPC_HD V arithmetic(V a, V b) {
  using U = WrapType<V>;
  if constexpr (kOp == kAdd) {
    return static_cast<V>(static_cast<U>(a) + static_cast<U>(b));
  } else if constexpr (kOp == kSub) {
    return static_cast<V>(static_cast<U>(a) - static_cast<U>(b));
  } else if constexpr (kOp == kMul) {
    return static_cast<V>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    static_assert(kOp == kDiv);
    return int_div(a, b);
  }
}

// a op b for a comparison or logical op (bool result).
template <int32_t kOp, typename V>
AMPC_HD bool predicate(V a, V b) {
  if constexpr (kOp == kEqual) {
    return a == b;
  } else if constexpr (kOp == kLess) {
    return a < b;
  } else if constexpr (kOp == kGreater) {
    return a > b;
  } else if constexpr (kOp == kLessOrEqual) {
    return a <= b;
  } else if constexpr (kOp == kGreaterOrEqual) {
    return a >= b;
  } else if constexpr (kOp == kAnd) {
    return a && b;
  } else if constexpr (kOp == kOr) {
    return a || b;
  } else {
    static_assert(kOp == kXor);
    return a != b;
  }
}

// The result type of op on V.
template <int32_t kOp, typename V>
using ResultType = std::conditional_t<is_comparison(kOp) || is_logical(kOp), bool, V>;

template <int32_t kOp, typename V>
AMPC_HD ResultType<kOp, V> apply(V a, V b) {
  if constexpr (is_comparison(kOp) || is_logical(kOp)) {
    return predicate<kOp>(a, b);
  } else {
    return arithmetic<kOp>(a, b);
  }
}

// ---- Cast (kernels/cpu/elementwise_types.h: convert = store<To>(load(v))) ----

// The value Cast computes with: 16-bit floats widened exactly to fp32, everything else as is.
AMPC_HD float cast_load(Half v) {
  return shared::Elem<Half>::load(v);
}
AMPC_HD float cast_load(BFloat16 v) {
  return shared::Elem<BFloat16>::load(v);
}
template <typename T>
AMPC_HD T cast_load(T v) {
  return v;
}

// double -> float rounded to odd, so that a later RNE to 16 bits equals a direct RNE from
// double (no double rounding): an inexact result with an even last bit moves one ulp towards
// d. Cast's store on every backend (store_as) goes through it.
AMPC_HD float double_to_float_odd(double d) {
  const float f = static_cast<float>(d);
  if (!is_finite(d) || static_cast<double>(f) == d) return f;
  uint32_t b = to_bits(f);
  if (!(b & 1u)) {
    const double af = f < 0 ? -static_cast<double>(f) : static_cast<double>(f);
    const double ad = d < 0 ? -d : d;
    b = af < ad ? b + 1 : b - 1;  // magnitude up or down; the sign bit stays
  }
  return from_bits(b);
}

// A float value truncated to the integer type I as x86-64's cvtt* instructions do (what the
// CPU op's static_cast compiles to): the integer minimum for NaN and out-of-range values of a
// 32- or 64-bit signed integer; narrower types truncate through int32 and uint32 through int64,
// as GCC's code does; uint64 gives 2^63 outside [0, 2^64).
template <typename I, typename F>
AMPC_HD I float_to_int(F v) {
  if constexpr (sizeof(I) < 4) {
    return static_cast<I>(float_to_int<int32_t>(v));
  } else if constexpr (std::is_same_v<I, uint32_t>) {
    return static_cast<uint32_t>(float_to_int<int64_t>(v));
  } else if constexpr (std::is_same_v<I, uint64_t>) {
    if (!(v >= F(0) && v < F(18446744073709551616.0))) return uint64_t(1) << 63;
    return static_cast<uint64_t>(v);
  } else {
    constexpr F lo = -static_cast<F>(static_cast<uint64_t>(1) << (sizeof(I) * 8 - 1));
    if (!(v >= lo && v < -lo))
      return static_cast<I>(static_cast<uint64_t>(1) << (sizeof(I) * 8 - 1));
    return static_cast<I>(v);
  }
}

// Stores the computation value v as element type To, the one definition of Cast's store (the
// kernels' cast_store below, the CPU's store<To> in kernels/cpu/elementwise_types.h): 16-bit
// floats round once to nearest even (from double through round-to-odd) with
// Conversion::round16<To>(float), bool is v != 0, float -> integer is
// Conversion::to_int<To>(v), everything else is the C++ conversion. The two Conversion types
// differ in how they compute, not in the values: both round16 give base/half.h's bits.
template <typename To, typename Conversion, typename V>
AMPC_HD To store_as(V v) {
  if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    float f;
    if constexpr (std::is_same_v<V, double>) {
      f = double_to_float_odd(v);
    } else {
      f = static_cast<float>(v);
    }
    return Conversion::template round16<To>(f);
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != V(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<V>) {
    return Conversion::template to_int<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// The kernels' conversions: cast_load, rowwise_fp.h's rounding and float_to_int's defined
// truncation.
struct KernelConversion {
  template <typename T>
  AMPC_HD static auto load(T v) {
    return cast_load(v);
  }
  template <typename To>
  AMPC_HD static To round16(float f) {
    return shared::Elem<To>::store(f);
  }
  template <typename I, typename F>
  AMPC_HD static I to_int(F v) {
    return float_to_int<I>(v);
  }
};

// Stores the computation value v as element type To as the CPU's store<To> does; float ->
// integer truncates as x86-64 does (float_to_int).
template <typename To, typename V>
AMPC_HD To cast_store(V v) {
  return store_as<To, KernelConversion>(v);
}

// Cast of one element on every backend (the CPU's convert in kernels/cpu/elementwise_types.h,
// the kernels' cast_value): the value itself for the same type, else Conversion::load's
// computation value stored as To (store_as).
template <typename To, typename Conversion, typename From>
AMPC_HD To convert_as(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else {
    return store_as<To, Conversion>(Conversion::load(v));
  }
}

template <typename To, typename From>
AMPC_HD To cast_value(From v) {
  return convert_as<To, KernelConversion>(v);
}

}  // namespace ampc::kernels::shared::ew
