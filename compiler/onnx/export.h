// IR -> ONNX. The result passes ONNX's full check (check_model below) and imports back to
// an identical IR.
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "compiler/ir/graph.h"

namespace ampc::onnx_io {

onnx::ModelProto export_model(const ir::Model& model);

// Writes the model to `path` (through a temporary file, so a failure leaves nothing behind).
void save_model(const ir::Model& model, const std::string& path);

// ONNX's checker with the full check: the structural checker, then strict shape and type
// inference (what onnx.checker.check_model(m, full_check=True) does in Python).
void check_model(const onnx::ModelProto& proto);

}  // namespace ampc::onnx_io
