// IR -> ONNX's training format (TrainingInfoProto, see onnx.proto): the main graph is the
// inference graph, training_info[0].algorithm the rest of the training step (backward and
// optimizer), update_binding the model's state updates.
#pragma once

#include <set>
#include <string>

#include <onnx/onnx_pb.h>

#include "ir/graph.h"

namespace ampc::onnx_io {

// For a model with state_updates (a compiled training step):
//  - graph: the nodes the declared graph outputs need (forward pass and loss), the
//    initializers and graph inputs they read, the graph outputs;
//  - training_info[0].algorithm: every other node, initializer (optimizer state, constants
//    of the passes) and graph input; its outputs are the update sources;
//  - training_info[0].update_binding: one entry per state update, target <- source. A
//    source computed by the main graph (BatchNormalization's running statistics) is passed
//    through an Identity in the algorithm, since a binding value must be an output of the
//    algorithm or a declared output of the main graph.
// The result passes check_model (export.h).
onnx::ModelProto export_training_model(const ir::Model& model);

// Clears the data of the initializers of the main graph and of the algorithm whose names
// are in `names` (keeping name, element type and dims).
void drop_initializer_data(onnx::ModelProto& proto, const std::set<std::string>& names);

}  // namespace ampc::onnx_io
