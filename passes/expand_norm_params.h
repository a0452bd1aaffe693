// LayerNormalization's scale and bias may broadcast to the normalised shape (ONNX allows a
// scale of shape [1], say); the CUDA kernel, like torch's, reads one value per normalised
// element. This pass gives such an operand an Expand to the normalised shape before autodiff,
// so that every backend sees full-shape operands and the gradient of Expand sums the broadcast
// back. Operands whose shape is not static, or has more axes than the normalised shape (which
// ONNX does not allow), are left alone for the backends to refuse naming the node.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Returns the number of Expand nodes inserted. Needs static shapes (static_shapes.h).
int expand_norm_params(ir::Model& model);

}  // namespace ampc::passes
