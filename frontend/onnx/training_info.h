// ONNX's training format (TrainingInfoProto, see onnx.proto) at the proto level: the rules
// ampc holds such a model to, and the combined training graph (main graph + algorithm).
#pragma once

#include <onnx/onnx_pb.h>

namespace ampc::onnx_io {

// Throws ampc::Error unless the model's training_info is one ampc supports and ONNX allows:
// at most one TrainingInfoProto, an empty initialization graph, and an update_binding whose
// keys are distinct initializers of the main graph or the algorithm and whose values are
// outputs of the algorithm or of the main graph.
void check_training_info(const onnx::ModelProto& proto);

// The model whose graph is the training step: the main graph's input, initializer, node,
// value_info and output lists followed by the algorithm's, training_info removed. Checks
// check_training_info first.
onnx::ModelProto combined_training_model(const onnx::ModelProto& proto);

}  // namespace ampc::onnx_io
