// Buffers a PyTorch forward writes (an EMA codebook, DINO's running centre, an observation
// normaliser's statistics, a step counter) as state updated after each step, as PyTorch's
// forward leaves them. torch.onnx.export keeps what the forward computes from the new value
// but drops the write itself; ampc's exporter (python/ampc/_export.py) lists such buffers
// under kBufferUpdatesKey and exports each one's final value as the graph output
// kBufferUpdateOutputPrefix + name. This pass takes those outputs out of the graph's outputs
// (the loss stays the only one) and makes each the source of its buffer's state update.
// BatchNorm's running statistics are not listed: running_statistics.h updates them.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

inline constexpr const char* kBufferUpdatesKey = "ampc.buffer_updates";
inline constexpr const char* kBufferUpdateOutputPrefix = "ampc.buffer_update/";

// Returns the number of buffers made state. Throws ampc::Error naming the buffer when it is
// not an initializer, has no such output, or the output's type differs from the buffer's.
int add_buffer_updates(ir::Model& model);

}  // namespace ampc::passes
