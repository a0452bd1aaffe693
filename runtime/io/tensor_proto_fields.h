// The typed fields of an ONNX TensorProto (float_data, int32_data, ...): which one holds a
// dtype's values and as what C++ type each is stored. Both readers of tensor data use it:
// the importer (frontend/onnx/proto_convert.cc) and tensor_pb.cc.
#pragma once

#include <onnx/onnx_pb.h>

#include "base/dtype.h"

namespace ampc::rt::io {

// Calls `f.template operator()<T>(field)` with the field of `p` that holds values of `dtype`
// when there is no raw_data (onnx.proto, TensorProto) and T, the C++ type one value is
// stored as (a complex number: two; fp16 and bf16: their bits). Returns false, calling
// nothing, for the dtypes without one (strings, undefined).
template <typename F>
bool visit_typed_field(const onnx::TensorProto& p, DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kComplex64:
      f.template operator()<float>(p.float_data());
      return true;
    case DType::kFloat64:
    case DType::kComplex128:
      f.template operator()<double>(p.double_data());
      return true;
    case DType::kInt64:
      f.template operator()<int64_t>(p.int64_data());
      return true;
    case DType::kUInt64:
      f.template operator()<uint64_t>(p.uint64_data());
      return true;
    case DType::kUInt32:
      f.template operator()<uint32_t>(p.uint64_data());
      return true;
    case DType::kInt32:
      f.template operator()<int32_t>(p.int32_data());
      return true;
    case DType::kInt16:
      f.template operator()<int16_t>(p.int32_data());
      return true;
    case DType::kInt8:
      f.template operator()<int8_t>(p.int32_data());
      return true;
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      f.template operator()<uint16_t>(p.int32_data());
      return true;
    case DType::kUInt8:
    case DType::kBool:
      f.template operator()<uint8_t>(p.int32_data());
      return true;
    default:
      return false;
  }
}

}  // namespace ampc::rt::io
