// Reading an ONNX file into a ModelProto: parse errors, truncation, and external data that
// must stay inside the model's folder.
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

namespace ampc::onnx_io {

onnx::ModelProto read_model_proto(const std::string& path);

// Loads every external-data initializer of `proto` into raw_data. `model_dir` is the folder
// of the model file; a location that is absolute or leaves that folder is refused.
void resolve_external_data(onnx::ModelProto& proto, const std::string& model_dir);

}  // namespace ampc::onnx_io
