// Resize (torch's nn.Upsample / F.interpolate, nearest, (bi)linear and bicubic) lowered at
// compile time into MatMuls with constant interpolation matrices: along each resized axis the
// output is A x, where row i of A holds the weights output i takes from the input (one 1 for
// nearest, two weights for linear, four for cubic: Keys' kernel with cubic_coeff_a, the edge
// read for taps outside or, with exclude_outside, those dropped and the rest renormalised; by
// the node's coordinate_transformation_mode and nearest_mode). So the forward, the gradient
// (A^T dy), autocast and both backends need nothing new. Any axis may be resized: the last
// two directly (what 1-D and 2-D upsampling do), an earlier one (a volume's depth, trilinear
// upsampling) through Reshapes to [before, in, after]. tf_crop_and_resize and antialias are
// refused naming the node.
//
// align_corners with scales: ONNX maps output i to i (in - 1) / (in x scale - 1), the length
// unrounded; PyTorch, whose F.interpolate(scale_factor=s, align_corners=True) exports so, to
// i (in - 1) / (out - 1). A model PyTorch exported (producer_name "pytorch") gets PyTorch's
// mapping, any other ONNX's; they differ only where in x scale is not whole.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Returns the number of Resize nodes lowered. Needs static shapes (static_shapes.h).
int lower_resize(ir::Model& model);

}  // namespace ampc::passes
