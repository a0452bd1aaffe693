// Pooling over up to three spatial dimensions, one plane (one (n, c) pair) at a time:
// x [planes, image] -> y [planes, cols], with the window geometry of ConvGeom.
#pragma once

#include <cstdint>

#include "kernels/cpu/conv.h"

namespace ampc::kernels::cpu {

// Max over the window taps inside the image (padding never wins). indices (may be null)
// receives for every output the flat index of the maximum in x: plane * image_size plus
// the spatial offset, row-major or, with column_major, column-major.
// Instantiated for float, double, int8, uint8.
template <typename T>
void max_pool(const ConvGeom& g, const T* x, int64_t planes, T* y, int64_t* indices,
              bool column_major);

// Mean over the window; the divisor counts the taps inside the image, or with
// count_include_pad also those in the padding (up to pad_end). float and double.
template <typename T>
void avg_pool(const ConvGeom& g, const T* x, int64_t planes, T* y, bool count_include_pad);

// (sum over the window of |x|^p)^(1/p). float and double.
template <typename T>
void lp_pool(const ConvGeom& g, const T* x, int64_t planes, T* y, int64_t p);

}  // namespace ampc::kernels::cpu
