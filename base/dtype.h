// Element types. The numeric values are ONNX's TensorProto.DataType codes so that the IR,
// the plan file and the runtime agree without translation tables; nothing here includes ONNX.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ampc {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
};

// Bytes per element; 0 for kUndefined and kString (strings have no fixed width).
size_t dtype_size(DType t);
// Short name used in dumps, JSON and messages: "f32", "f16", "bf16", "i64", "bool", ...
std::string_view dtype_name(DType t);
// Inverse of dtype_name, also accepting ONNX spellings ("float", "float16", "int64", ...).
std::optional<DType> dtype_from_name(std::string_view name);
// A valid ONNX code that this enum names.
bool dtype_is_known(int32_t code);

bool is_float(DType t);    // f16, bf16, f32, f64
bool is_integer(DType t);  // signed and unsigned integers (not bool)

}  // namespace ampc
