// Element types as the CPU kernels see them: the fp32 "opmath" type that 16-bit storage types
// compute in, load/store with one round-to-nearest-even at the store, conversions between any
// two element types, and a dispatch from a runtime DType to a C++ type restricted to a set.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "base/dtype.h"
#include "base/half.h"
#include "kernels/shared/elementwise_int.h"

namespace ampc::kernels::cpu {

// The type arithmetic happens in: fp32 for the 16-bit float types, the type itself otherwise.
template <typename T>
struct Opmath {
  using type = T;
};
template <>
struct Opmath<Half> {
  using type = float;
};
template <>
struct Opmath<BFloat16> {
  using type = float;
};
template <typename T>
using opmath_t = typename Opmath<T>::type;

template <typename T>
constexpr bool is_float_v = std::is_floating_point_v<opmath_t<T>>;

// Whether an opmath value is a NaN (never, for integers).
template <typename M>
inline bool is_nan_value(M v) {
  if constexpr (std::is_floating_point_v<M>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

template <typename T>
inline opmath_t<T> load(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return half_to_float(v);  // branch-free: the loops vectorise
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return bf16_to_float(v);
  } else {
    return v;
  }
}

// The CPU's conversions in store_as / convert_as: load, base/half.h's rounding, and
// C++'s float -> integer conversion (what GCC's cvtt* code gives; kernels/shared's float_to_int
// spells it out).
struct CpuConversion {
  template <typename T>
  static opmath_t<T> load(T v) {
    return cpu::load(v);
  }
  template <typename To>
  static To round16(float f) {
    if constexpr (std::is_same_v<To, Half>) {
      return float_to_half(f);
    } else {
      return float_to_bf16(f);
    }
  }
  template <typename I, typename F>
  static I to_int(F v) {
    return static_cast<I>(v);
  }
};

// Any value to element type T: RNE for the 16-bit floats (once, from the value given), C++
// conversion otherwise (float -> integer truncates towards zero), != 0 for bool
// (kernels/shared/elementwise_int.h's store_as).
template <typename T, typename V>
inline T store(V v) {
  return shared::ew::store_as<T, CpuConversion>(v);
}

// Element-type conversion: what Cast does per element (kernels/shared/elementwise_int.h's
// convert_as).
template <typename To, typename From>
inline To convert(From v) {
  return shared::ew::convert_as<To, CpuConversion>(v);
}

template <typename T>
struct Tag {
  using type = T;
};

// Sets of element types an operator accepts.
enum TypeSet : unsigned {
  kFloats = 1,    // f32 f64 f16 bf16
  kSigned = 2,    // i8 i16 i32 i64
  kUnsigned = 4,  // u8 u16 u32 u64
  kBoolType = 8,  // bool
  kIntegers = kSigned | kUnsigned,
  kNumeric = kFloats | kIntegers,
  kSignedNumeric = kFloats | kSigned,
  kAllTypes = kNumeric | kBoolType,
};

// Calls f(Tag<T>{}) for the C++ type T of `t` when t is in Set; false when it is not.
template <unsigned Set, typename F>
bool visit_dtype(DType t, F&& f) {
#define AMPC_VISIT_CASE(code, set, T)   \
  case DType::code:                     \
    if constexpr ((Set & (set)) != 0) { \
      f(Tag<T>{});                      \
      return true;                      \
    }                                   \
    break;
  switch (t) {
    AMPC_VISIT_CASE(kFloat32, kFloats, float)
    AMPC_VISIT_CASE(kFloat64, kFloats, double)
    AMPC_VISIT_CASE(kFloat16, kFloats, Half)
    AMPC_VISIT_CASE(kBFloat16, kFloats, BFloat16)
    AMPC_VISIT_CASE(kInt8, kSigned, int8_t)
    AMPC_VISIT_CASE(kInt16, kSigned, int16_t)
    AMPC_VISIT_CASE(kInt32, kSigned, int32_t)
    AMPC_VISIT_CASE(kInt64, kSigned, int64_t)
    AMPC_VISIT_CASE(kUInt8, kUnsigned, uint8_t)
    AMPC_VISIT_CASE(kUInt16, kUnsigned, uint16_t)
    AMPC_VISIT_CASE(kUInt32, kUnsigned, uint32_t)
    AMPC_VISIT_CASE(kUInt64, kUnsigned, uint64_t)
    AMPC_VISIT_CASE(kBool, kBoolType, bool)
    default:
      break;
  }
#undef AMPC_VISIT_CASE
  return false;
}

}  // namespace ampc::kernels::cpu
