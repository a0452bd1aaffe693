// Conversions between single ONNX protobuf messages and IR pieces, used by import and
// export alike so the two stay exact inverses.
#pragma once

#include <onnx/onnx_pb.h>

#include "ir/graph.h"

namespace ampc::onnx_io {

// Tensor data in any of ONNX's encodings -> raw little-endian bytes. `what` names the
// tensor in errors.
ir::Tensor tensor_from_proto(const onnx::TensorProto& t, const std::string& what);
void tensor_to_proto(const ir::Tensor& t, onnx::TensorProto* out);

// A value's type; non-tensor types (sequence, map, optional, sparse) are refused with a
// message naming the value.
ir::TensorType type_from_proto(const onnx::TypeProto& t, const std::string& value_name);
void type_to_proto(const ir::TensorType& t, onnx::TypeProto* out);

}  // namespace ampc::onnx_io
