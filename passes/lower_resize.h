// Resize (torch's nn.Upsample / F.interpolate, nearest and (bi)linear) lowered at compile time
// into MatMuls with constant interpolation matrices: along each resized axis the output is
// A x, where row i of A holds the weights output i takes from the input (one 1 for nearest,
// two weights for linear, by the node's coordinate_transformation_mode and nearest_mode).
// So the forward, the gradient (A^T dy), autocast and both backends need nothing new.
// Only the last two axes may be resized (what 1-D and 2-D upsampling do); cubic mode,
// tf_crop_and_resize, antialias and resizing batch or channel axes are refused naming the node.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Returns the number of Resize nodes lowered. Needs static shapes (static_shapes.h).
int lower_resize(ir::Model& model);

}  // namespace ampc::passes
