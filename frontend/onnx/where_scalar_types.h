// torch 1.13 exports a Python float in torch.where (`torch.where(mask, x, 0.1)`) as a double
// Constant beside float data, and then believes the Where's result is double: it casts what
// follows (even the next Linear's weights) to double. PyTorch computes all of it in x's type.
// No cast at import gives the graph PyTorch's meaning back (the exporter's Casts to double
// cannot be told from a user's .double()), so such a Where is refused in one line that names
// it, the cause and the two ways to write it that export correctly. A Python int is exported
// as an int64 Constant, which ONNX's Where refuses beside floats: refused the same way, with
// its own advice (ampc.export writes both numbers in the other branch's type by itself).
#pragma once

#include "ir/graph.h"

namespace ampc::onnx_io {

// Throws for the first Where whose branch is a one-element double or int64 Constant while the
// other branch is float, fp16 or bf16 (torch 1.13's torch.where with a Python number).
void refuse_double_scalar_where(const ir::Graph& graph);

}  // namespace ampc::onnx_io
