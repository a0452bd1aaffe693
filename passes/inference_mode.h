// Switches a model exported in training mode to inference behaviour, as PyTorch's
// model.eval() does: BatchNormalization normalises with its running statistics instead of
// the batch's, and Dropout passes its input through. torch.onnx.export in training mode
// records both in the graph (BatchNormalization's training_mode attribute, Dropout's
// training_mode input); evaluation on held-out data must not use them. A synchronised
// BatchNorm (passes/sync_batch_norm.h) normalises with its running statistics too: each
// ampc.BatchStatistics node is replaced by its running-statistics inputs, and the batch
// statistics (with their all-reduces) are removed as dead code.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Returns the number of nodes changed. Throws ampc::Error naming the node when an output
// that only exists in training mode (running statistics, dropout mask) is still read.
int set_inference_mode(ir::Model& model);

}  // namespace ampc::passes
