#include "base/dtype.h"

#include <array>

namespace ampc {
namespace {

struct DTypeInfo {
  DType type;
  size_t size;
  std::string_view name;
  std::string_view onnx_name;
};

constexpr std::array<DTypeInfo, 17> kInfo = {{
    {DType::kUndefined, 0, "undefined", "undefined"},
    {DType::kFloat32, 4, "f32", "float"},
    {DType::kUInt8, 1, "u8", "uint8"},
    {DType::kInt8, 1, "i8", "int8"},
    {DType::kUInt16, 2, "u16", "uint16"},
    {DType::kInt16, 2, "i16", "int16"},
    {DType::kInt32, 4, "i32", "int32"},
    {DType::kInt64, 8, "i64", "int64"},
    {DType::kString, 0, "string", "string"},
    {DType::kBool, 1, "bool", "bool"},
    {DType::kFloat16, 2, "f16", "float16"},
    {DType::kFloat64, 8, "f64", "double"},
    {DType::kUInt32, 4, "u32", "uint32"},
    {DType::kUInt64, 8, "u64", "uint64"},
    {DType::kComplex64, 8, "c64", "complex64"},
    {DType::kComplex128, 16, "c128", "complex128"},
    {DType::kBFloat16, 2, "bf16", "bfloat16"},
}};

const DTypeInfo& info(DType t) {
  auto code = static_cast<size_t>(t);
  return code < kInfo.size() ? kInfo[code] : kInfo[0];
}

}  // namespace

size_t dtype_size(DType t) {
  return info(t).size;
}
std::string_view dtype_name(DType t) {
  return info(t).name;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfo) {
    if (i.type != DType::kUndefined && (name == i.name || name == i.onnx_name)) return i.type;
  }
  if (name == "float32") return DType::kFloat32;
  if (name == "float64") return DType::kFloat64;
  return std::nullopt;
}

bool dtype_is_known(int32_t code) {
  return code > 0 && code < static_cast<int32_t>(kInfo.size());
}

bool is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         t == DType::kFloat64;
}

bool is_integer(DType t) {
  switch (t) {
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kUInt16:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt32:
    case DType::kUInt64:
      return true;
    default:
      return false;
  }
}

}  // namespace ampc
