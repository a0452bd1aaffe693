// Convolution by im2col + GEMM and transposed convolution by GEMM + col2im, over up to three
// spatial dimensions (lower-rank problems use leading spatial dimensions of size 1).
#pragma once

#include <cstdint>

#include "kernels/shared/kernel_args.h"

namespace ampc::kernels::cpu {

// How a sliding window maps between the "image" side (convolution input, transposed
// convolution output, pooling input) and the "column" side (one position per window:
// convolution output, transposed convolution input, pooling output): the fields of
// kernels/shared/kernel_args.h's PoolGeometry (image, cols, kernel, stride, dilation, pad,
// pad_end), which the CUDA pooling kernels take as they are.
//   image index = column index * stride - pad + kernel index * dilation.
// Image indices outside [0, image) are padding. pad may be negative (extra room at the start).
struct ConvGeom : shared::PoolGeometry {
  int64_t image_size() const { return image[0] * image[1] * image[2]; }
  int64_t cols_size() const { return cols[0] * cols[1] * cols[2]; }
  int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
};

// x: [batch, channels, image]; col: [channels * kernel_size, batch * cols_size] with
// zeros for padding taps.
template <typename T>
void im2col(const ConvGeom& g, const T* x, int64_t channels, int64_t batch, T* col);

// The adjoint of im2col for one image: y[channels, image] += scatter of col
// [channels * kernel_size, cols_size].
template <typename T>
void col2im(const ConvGeom& g, const T* col, int64_t channels, T* y);

// y[n, m, cols] = conv(x[n, c, image], w[m, c / group, kernel]) + bias[m] (bias may be null).
// Instantiated for float and double.
template <typename T>
void conv_forward(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y, int64_t n,
                  int64_t c, int64_t m, int64_t group);

// y[n, m, image] = conv_transpose(x[n, c, cols], w[c, m / group, kernel]) + bias[m].
template <typename T>
void conv_transpose(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y, int64_t n,
                    int64_t c, int64_t m, int64_t group);

// The column indices [lo, hi) of a row of `cols` whose image index
// col * stride + offset lies inside [0, image).
inline void valid_cols(int64_t cols, int64_t image, int64_t stride, int64_t offset, int64_t* lo,
                       int64_t* hi) {
  int64_t l = offset < 0 ? (-offset + stride - 1) / stride : 0;
  int64_t h = image - offset > 0 ? (image - offset + stride - 1) / stride : 0;
  if (h > cols) h = cols;
  if (l > h) l = h;
  *lo = l;
  *hi = h;
}

// Splits a flat kernel offset into its three kernel indices.
inline void kernel_index(const ConvGeom& g, int64_t kk, int64_t* k0, int64_t* k1, int64_t* k2) {
  *k2 = kk % g.kernel[2];
  *k1 = (kk / g.kernel[2]) % g.kernel[1];
  *k0 = kk / (g.kernel[2] * g.kernel[1]);
}

// The column range [lo, hi) of the last dimension whose taps of kernel offset kk read inside
// the image (off2: that tap's image offset along the last dimension).
struct RowTaps {
  int64_t k0, k1, k2, off2, lo, hi;
};

inline RowTaps row_taps(const ConvGeom& g, int64_t kk) {
  RowTaps t;
  kernel_index(g, kk, &t.k0, &t.k1, &t.k2);
  t.off2 = t.k2 * g.dilation[2] - g.pad[2];
  valid_cols(g.cols[2], g.image[2], g.stride[2], t.off2, &t.lo, &t.hi);
  return t;
}

}  // namespace ampc::kernels::cpu
