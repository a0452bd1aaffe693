// Host-side dispatch from a runtime DType to the C++ storage type the data-movement,
// elementwise, pooling and normalisation kernels and their twins are instantiated for.
// Host code only (g++ and the host side of nvcc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "base/dtype.h"
#include "base/error.h"
#include "base/half.h"
#include "kernels/shared/dtype_visit.h"
#include "kernels/shared/elementwise_int.h"
#include "kernels/shared/index_math.h"

namespace ampc::kernels::shared {

// f(TypeTag<T>) for the float types: f32, f64, f16, bf16. False for other dtypes.
template <typename F>
bool visit_float(DType t, F&& f) {
  return visit_listed<F32Entry, F64Entry, F16Entry, BF16Entry>(t, f);
}

// f(TypeTag<T>) for Cast's types: bool, i32, i64 and the float types.
template <typename F>
bool visit_cast_type(DType t, F&& f) {
  return visit_listed<BoolEntry, I32Entry, I64Entry>(t, f) || visit_float(t, f);
}

// f(TypeTag<U>) with U the unsigned integer of the element size of t (1, 2, 4 or 8 bytes):
// moves the bits of any fixed-width element. Throws for other element types.
template <typename F>
void visit_bits(DType t, const char* what, F&& f) {
  switch (dm::element_bytes(t == DType::kString ? 0 : dtype_size(t), what)) {
    case 1:
      return f(TypeTag<uint8_t>{});
    case 2:
      return f(TypeTag<uint16_t>{});
    case 4:
      return f(TypeTag<uint32_t>{});
    default:
      return f(TypeTag<uint64_t>{});
  }
}

[[noreturn]] inline void unsupported(const char* what, DType t) {
  throw Error(std::string(what) + ": element type " + std::string(dtype_name(t)) +
              " is not supported");
}

// The bits of v converted to element type t as the CPU ops convert a float attribute
// (kernels/cpu/elementwise_types.h's store<T>(float)): Pad's `value` before opset 11.
inline uint64_t fill_bits(DType t, float v) {
  auto bits = [](auto x) {
    uint64_t b = 0;
    std::memcpy(&b, &x, sizeof x);
    return b;
  };
  switch (t) {
    case DType::kBool:
      return bits(ew::cast_store<bool>(v));
    case DType::kUInt8:
      return bits(ew::cast_store<uint8_t>(v));
    case DType::kInt8:
      return bits(ew::cast_store<int8_t>(v));
    case DType::kUInt16:
      return bits(ew::cast_store<uint16_t>(v));
    case DType::kInt16:
      return bits(ew::cast_store<int16_t>(v));
    case DType::kUInt32:
      return bits(ew::cast_store<uint32_t>(v));
    case DType::kInt32:
      return bits(ew::cast_store<int32_t>(v));
    case DType::kUInt64:
      return bits(ew::cast_store<uint64_t>(v));
    case DType::kInt64:
      return bits(ew::cast_store<int64_t>(v));
    case DType::kFloat16:
      return bits(ew::cast_store<Half>(v));
    case DType::kBFloat16:
      return bits(ew::cast_store<BFloat16>(v));
    case DType::kFloat32:
      return bits(v);
    case DType::kFloat64:
      return bits(static_cast<double>(v));
    default:
      unsupported("pad", t);
  }
}

}  // namespace ampc::kernels::shared
