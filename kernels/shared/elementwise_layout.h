// Host side of the integer / bool elementwise kernels and Cast (kernels/cuda/elementwise.cu,
// kernels/twin/elementwise.cc): broadcast layouts and the dispatch from (op, dtype) and
// (from, to) to the instantiated C++ types, with the errors for unsupported combinations.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/shared/elementwise_dispatch.h"
#include "kernels/shared/elementwise_int.h"
#include "kernels/shared/index_math.h"

namespace ampc::kernels::shared::ew {

template <int32_t kOp>
using OpTag = std::integral_constant<int32_t, kOp>;

// a, b broadcast to out (contiguous): strides of a, b, out.
inline dm::Layout<3> binary_layout(const dm::Dims& a, const dm::Dims& b, const dm::Dims& out) {
  return dm::make_layout<3>(
      out,
      {dm::broadcast_strides(a, out), dm::broadcast_strides(b, out), dm::contiguous_strides(out)},
      "binary");
}

inline dm::Layout<4> where_layout(const dm::Dims& c, const dm::Dims& x, const dm::Dims& y,
                                  const dm::Dims& out) {
  return dm::make_layout<4>(out,
                            {dm::broadcast_strides(c, out), dm::broadcast_strides(x, out),
                             dm::broadcast_strides(y, out), dm::contiguous_strides(out)},
                            "where");
}

inline const char* op_name(int32_t op) {
  static const char* const names[] = {
      "Add", "Sub", "Mul", "Div", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
      "And", "Or",  "Xor"};
  return op >= 0 && op <= kXor ? names[op] : "(unknown op)";
}

// f(OpTag<op>, TypeTag<V>) for a supported pair: i32, i64, i8, u8 for the arithmetic and
// order comparisons, also bool for Equal, bool only for And / Or / Xor.
template <typename F>
void visit_binary(int32_t op, DType t, F&& f) {
  auto with_op = [&](auto type_tag) {
    using V = typename decltype(type_tag)::type;
    constexpr bool is_bool = std::is_same_v<V, bool>;
    switch (op) {
#define AMPC_EW_CASE(code, allowed)      \
  case code:                             \
    if constexpr (allowed) {             \
      return f(OpTag<code>{}, type_tag); \
    }                                    \
    break;
      AMPC_EW_CASE(kAdd, !is_bool)
      AMPC_EW_CASE(kSub, !is_bool)
      AMPC_EW_CASE(kMul, !is_bool)
      AMPC_EW_CASE(kDiv, !is_bool)
      AMPC_EW_CASE(kEqual, true)
      AMPC_EW_CASE(kLess, !is_bool)
      AMPC_EW_CASE(kGreater, !is_bool)
      AMPC_EW_CASE(kLessOrEqual, !is_bool)
      AMPC_EW_CASE(kGreaterOrEqual, !is_bool)
      AMPC_EW_CASE(kAnd, is_bool)
      AMPC_EW_CASE(kOr, is_bool)
      AMPC_EW_CASE(kXor, is_bool)
#undef AMPC_EW_CASE
      default:
        break;
    }
    throw Error(std::string("binary: ") + op_name(op) + " on element type " +
                std::string(dtype_name(t)) + " is not supported");
  };
  switch (t) {
    case DType::kInt32:
      return with_op(TypeTag<int32_t>{});
    case DType::kInt64:
      return with_op(TypeTag<int64_t>{});
    case DType::kInt8:
      return with_op(TypeTag<int8_t>{});
    case DType::kUInt8:
      return with_op(TypeTag<uint8_t>{});
    case DType::kBool:
      return with_op(TypeTag<bool>{});
    default:
      throw Error(std::string("binary: ") + op_name(op) + " on element type " +
                  std::string(dtype_name(t)) +
                  " is not supported (int32, int64, int8, uint8, bool)");
  }
}

// f(TypeTag<From>, TypeTag<To>) for Cast between {bool, i32, i64, f16, bf16, f32, f64}.
template <typename F>
void visit_cast(DType from, DType to, F&& f) {
  bool to_ok = true;
  const bool from_ok = visit_cast_type(from, [&](auto from_tag) {
    to_ok = visit_cast_type(to, [&](auto to_tag) { f(from_tag, to_tag); });
  });
  if (!from_ok || !to_ok)
    throw Error("cast: from " + std::string(dtype_name(from)) + " to " +
                std::string(dtype_name(to)) +
                " is not supported (bool, int32, int64, float16, bfloat16, float32, float64)");
}

}  // namespace ampc::kernels::shared::ew
