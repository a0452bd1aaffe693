// Static shapes through shape arithmetic. torch's exporter computes reshape targets, slice
// bounds, split sizes and resize sizes from `x.shape` at run time (Shape -> Gather -> Div
// -> Concat -> Reshape, ...). With static graph inputs every one of these is a constant:
// fold_static_shapes alternates constant folding (constant_folding.h) with ONNX shape
// inference over the folded graph until neither learns anything more, so that a value whose
// shape depended on a folded computation gets its static shape.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Returns the number of nodes folded. Models in ONNX's training format (state updates) are
// folded once, without re-inference.
int fold_static_shapes(ir::Model& model);

// Throws an ampc::Error naming the first node (in graph order) whose output shape is still
// unknown and the input that made it so: a shape input computed at run time, or an input
// whose own shape is unknown. `why` starts the message ("differentiation needs static
// shapes").
void require_static_shapes(const ir::Graph& graph, const std::string& why);

}  // namespace ampc::passes
