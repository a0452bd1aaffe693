// GridSample (torch's F.grid_sample: flow warping, spatial transformers, deformable sampling)
// lowered into ops both backends run and autodiff differentiates, as PyTorch's CPU kernel
// computes it: the grid's x and y unnormalised to pixel coordinates (align_corners or not),
// clipped into the image for border padding; for bilinear mode the four corners floor(x),
// floor(x) + 1 (and y alike) gathered from the image (GatherElements on its flattened
// planes) and weighted by (x1 - x)(y1 - y), ..., each corner outside the image contributing 0;
// for nearest mode the pixel at the coordinates rounded half to even. The corners' positions
// go through integers, so the gradient reaches the image through the gathers and the grid
// through the weights only (PyTorch's gradients; nearest gives the grid none). Coordinates
// that are not finite act as in PyTorch's kernel: NaN out of bilinear zeros padding (the weight
// times the inside flag, not selected by it), NaN clipped to the first pixel for border.
//
// 4-D inputs (images) with bilinear or nearest mode and zeros or border padding; bicubic mode,
// reflection padding and volumetric (5-D) inputs are refused naming the node.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Returns the number of GridSample nodes lowered. Needs static shapes (static_shapes.h).
int lower_grid_sample(ir::Model& model);

}  // namespace ampc::passes
