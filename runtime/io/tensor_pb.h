// ONNX TensorProto files (.pb, as in ONNX's backend test data) <-> runtime tensors.
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "runtime/tensor.h"

namespace ampc::rt::io {

Tensor tensor_from_onnx(const onnx::TensorProto& proto, const std::string& what);
onnx::TensorProto tensor_to_onnx(const Tensor& t, const std::string& name);

// Returns the tensor and sets *name (when given) to the name stored in the file.
Tensor read_tensor_pb(const std::string& path, std::string* name = nullptr);
void write_tensor_pb(const Tensor& t, const std::string& name, const std::string& path);

}  // namespace ampc::rt::io
