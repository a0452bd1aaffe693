// Fixing graph input shapes before import, and ONNX shape inference over the result.
#pragma once

#include <onnx/onnx_pb.h>

#include "frontend/onnx/import.h"

namespace ampc::onnx_io {

// Applies options.input_shapes to the graph inputs; an unknown input name or a rank
// mismatch is an error. When any shape changes, stale intermediate shapes are dropped so
// that inference recomputes them.
void apply_input_shapes(onnx::ModelProto& proto, const ImportOptions& options);

// Every graph input that is not an initializer must have a fully static tensor shape.
void require_static_inputs(const onnx::ModelProto& proto);

// ONNX shape inference (with data propagation) filling value_info.
void infer_shapes(onnx::ModelProto& proto);

}  // namespace ampc::onnx_io
