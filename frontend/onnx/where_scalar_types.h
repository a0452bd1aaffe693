// torch 1.13 exports a Python float in torch.where (`torch.where(mask, x, 0.1)`) as a double
// Constant beside float data, and then believes the Where's result is double: it casts what
// follows (even the next Linear's weights) to double. PyTorch computes all of it in x's type.
// No cast at import gives the graph PyTorch's meaning back (the exporter's Casts to double
// cannot be told from a user's .double()), so such a Where is refused in one line that names
// it, the cause and the two ways to write it that export correctly.
#pragma once

#include "ir/graph.h"

namespace ampc::onnx_io {

// Throws for the first Where whose branch is a one-element double Constant while the other
// branch is float, fp16 or bf16.
void refuse_double_scalar_where(const ir::Graph& graph);

}  // namespace ampc::onnx_io
