#include "kernels/cpu/conv.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/matmul.h"

namespace ampc::kernels::cpu {
namespace {

// Upper bound on the elements of one im2col buffer; the batch is processed in chunks that fit.
constexpr int64_t kMaxColElements = int64_t{1} << 22;

// One row of im2col for one image: dst[cols] <- the taps of kernel offset t. Short rows
// use plain loops: library calls cost more than they save on a few elements.
template <typename T>
void im2col_row(const ConvGeom& g, const T* src, const RowTaps& t, T* dst) {
  const int64_t w = g.cols[2], s2 = g.stride[2];
  for (int64_t o0 = 0; o0 < g.cols[0]; ++o0) {
    const int64_t i0 = o0 * g.stride[0] - g.pad[0] + t.k0 * g.dilation[0];
    for (int64_t o1 = 0; o1 < g.cols[1]; ++o1, dst += w) {
      const int64_t i1 = o1 * g.stride[1] - g.pad[1] + t.k1 * g.dilation[1];
      if (i0 < 0 || i0 >= g.image[0] || i1 < 0 || i1 >= g.image[1]) {
        for (int64_t o2 = 0; o2 < w; ++o2) dst[o2] = T(0);
        continue;
      }
      const T* s = src + (i0 * g.image[1] + i1) * g.image[2];
      if (s2 == 1 && w >= 16) {
        std::fill(dst, dst + t.lo, T(0));
        if (t.hi > t.lo) std::memcpy(dst + t.lo, s + t.off2 + t.lo, sizeof(T) * (t.hi - t.lo));
        std::fill(dst + t.hi, dst + w, T(0));
      } else {
        for (int64_t o2 = 0; o2 < w; ++o2) {
          dst[o2] = o2 >= t.lo && o2 < t.hi ? s[o2 * s2 + t.off2] : T(0);
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void im2col(const ConvGeom& g, const T* x, int64_t channels, int64_t batch, T* col) {
  const int64_t k = g.kernel_size(), p = g.cols_size(), img = g.image_size();
  const int64_t rows = channels * k, ld = batch * p;
#pragma omp parallel for if (rows * ld > (1 << 18))
  for (int64_t r = 0; r < rows; ++r) {
    const RowTaps t = row_taps(g, r % k);
    const int64_t c = r / k;
    for (int64_t b = 0; b < batch; ++b) {
      im2col_row(g, x + (b * channels + c) * img, t, col + r * ld + b * p);
    }
  }
}

template <typename T>
void col2im(const ConvGeom& g, const T* col, int64_t channels, T* y) {
  const int64_t k = g.kernel_size(), p = g.cols_size(), img = g.image_size();
#pragma omp parallel for if (channels * k * p > (1 << 18))
  for (int64_t c = 0; c < channels; ++c) {
    T* plane = y + c * img;
    for (int64_t kk = 0; kk < k; ++kk) {
      const RowTaps t = row_taps(g, kk);
      const T* src = col + (c * k + kk) * p;
      for (int64_t o0 = 0; o0 < g.cols[0]; ++o0) {
        const int64_t i0 = o0 * g.stride[0] - g.pad[0] + t.k0 * g.dilation[0];
        for (int64_t o1 = 0; o1 < g.cols[1]; ++o1, src += g.cols[2]) {
          const int64_t i1 = o1 * g.stride[1] - g.pad[1] + t.k1 * g.dilation[1];
          if (i0 < 0 || i0 >= g.image[0] || i1 < 0 || i1 >= g.image[1]) continue;
          T* d = plane + (i0 * g.image[1] + i1) * g.image[2];
          for (int64_t o2 = t.lo; o2 < t.hi; ++o2) d[o2 * g.stride[2] + t.off2] += src[o2];
        }
      }
    }
  }
}

// out [group x mg rows of ld] = w [group x mg x cgk] x col [group x cgk rows of ld]: one GEMM
// per group.
template <typename T>
void grouped_gemm(const T* w, const T* col, T* out, int64_t group, int64_t mg, int64_t cgk,
                  int64_t ld) {
  for (int64_t gi = 0; gi < group; ++gi) {
    gemm(false, false, mg, ld, cgk, T(1), w + gi * mg * cgk, cgk, col + gi * cgk * ld, ld, T(0),
         out + gi * mg * ld, ld);
  }
}

// The GEMM result out [m, nb images x len] back to y [nb, m, p]: copy(src, dst, bias value)
// for every image b and output channel mi, src = out's row mi at b * len, dst = y's row (b, mi).
template <typename T, typename Copy>
void for_each_output(const T* out, int64_t len, const T* bias, T* y, int64_t nb, int64_t m,
                     int64_t p, Copy copy) {
  const int64_t ld = nb * len;
#pragma omp parallel for collapse(2) if (m * ld > (1 << 18))
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t mi = 0; mi < m; ++mi)
      copy(out + mi * ld + b * len, y + (b * m + mi) * p, bias ? bias[mi] : T(0));
  }
}

// Convolution with stride 1 everywhere: the input is copied once into a zero-padded buffer
// of extent P[d] = cols[d] + (kernel[d] - 1) * dilation[d]. Then the column row of a
// kernel offset is one contiguous slice of each padded image: output position (o0, o1, o2)
// reads padded index v + offset with v = (o0 * P1 + o1) * P2 + o2, computed for every v up
// to the last real output (the positions with o1 >= cols1 or o2 >= cols2 are computed and
// dropped). Rows of short length (small images) thus cost one copy each instead of one per
// output row.
template <typename T>
void conv_forward_unit_stride(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y,
                              int64_t n, int64_t c, int64_t m, int64_t group) {
  int64_t P[3];
  for (int d = 0; d < 3; ++d) P[d] = g.cols[d] + (g.kernel[d] - 1) * g.dilation[d];
  const int64_t padded = P[0] * P[1] * P[2], img = g.image_size(), k = g.kernel_size();
  const int64_t p = g.cols_size();
  const int64_t len = ((g.cols[0] - 1) * P[1] + (g.cols[1] - 1)) * P[2] + g.cols[2];
  const int64_t cg = c / group, mg = m / group;
  const int64_t chunk =
      std::clamp<int64_t>(kMaxColElements / std::max<int64_t>(c * k * len, 1), 1, n);
  const auto xp = std::make_unique_for_overwrite<T[]>(chunk * c * padded);
  const auto col = std::make_unique_for_overwrite<T[]>(c * k * chunk * len);
  const auto out = std::make_unique_for_overwrite<T[]>(m * chunk * len);
  const int64_t copy2 = std::max<int64_t>(0, std::min(g.image[2], P[2] - g.pad[2]));
  for (int64_t n0 = 0; n0 < n; n0 += chunk) {
    const int64_t nb = std::min(chunk, n - n0), ld = nb * len;
#pragma omp parallel for if (nb * c * padded > (1 << 18))
    for (int64_t plane = 0; plane < nb * c; ++plane) {
      T* dst = xp.get() + plane * padded;
      const T* src = x + (n0 * c + plane) * img;
      std::fill(dst, dst + padded, T(0));
      for (int64_t i0 = 0; i0 < g.image[0] && i0 + g.pad[0] < P[0]; ++i0) {
        for (int64_t i1 = 0; i1 < g.image[1] && i1 + g.pad[1] < P[1]; ++i1) {
          std::copy(src + (i0 * g.image[1] + i1) * g.image[2],
                    src + (i0 * g.image[1] + i1) * g.image[2] + copy2,
                    dst + ((i0 + g.pad[0]) * P[1] + i1 + g.pad[1]) * P[2] + g.pad[2]);
        }
      }
    }
#pragma omp parallel for if (c * k * ld > (1 << 18))
    for (int64_t r = 0; r < c * k; ++r) {
      int64_t k0, k1, k2;
      kernel_index(g, r % k, &k0, &k1, &k2);
      const int64_t off =
          (k0 * g.dilation[0] * P[1] + k1 * g.dilation[1]) * P[2] + k2 * g.dilation[2];
      for (int64_t b = 0; b < nb; ++b) {
        const T* src = xp.get() + (b * c + r / k) * padded + off;
        std::copy(src, src + len, col.get() + r * ld + b * len);
      }
    }
    grouped_gemm(w, col.get(), out.get(), group, mg, cg * k, ld);
    for_each_output(out.get(), len, bias, y + n0 * m * p, nb, m, p,
                    [&](const T* src, T* dst, T bv) {
                      for (int64_t o0 = 0; o0 < g.cols[0]; ++o0) {
                        for (int64_t o1 = 0; o1 < g.cols[1]; ++o1, dst += g.cols[2]) {
                          const T* row = src + (o0 * P[1] + o1) * P[2];
                          for (int64_t o2 = 0; o2 < g.cols[2]; ++o2) dst[o2] = row[o2] + bv;
                        }
                      }
                    });
  }
}

template <typename T>
void conv_forward(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y, int64_t n,
                  int64_t c, int64_t m, int64_t group) {
  const int64_t k = g.kernel_size(), p = g.cols_size(), img = g.image_size();
  const int64_t cg = c / group, mg = m / group;
  bool unit_stride = true, no_pad = true;
  for (int d = 0; d < 3; ++d) {
    unit_stride = unit_stride && g.stride[d] == 1;
    no_pad = no_pad && g.pad[d] == 0;
  }
  const bool pointwise = k == 1 && img == p && unit_stride && no_pad;
  if (unit_stride && !pointwise) return conv_forward_unit_stride(g, x, w, bias, y, n, c, m, group);
  // Small images are batched into one GEMM per group: [mg, cg*k] x [cg*k, nb*p].
  const int64_t per_image = std::max<int64_t>(c * k * p, 1);
  const int64_t chunk = pointwise ? 1 : std::clamp<int64_t>(kMaxColElements / per_image, 1, n);
  const auto col = std::make_unique_for_overwrite<T[]>(pointwise ? 0 : c * k * chunk * p);
  const auto tmp = std::make_unique_for_overwrite<T[]>(chunk > 1 ? m * chunk * p : 0);
  for (int64_t n0 = 0; n0 < n; n0 += chunk) {
    const int64_t nb = std::min(chunk, n - n0);
    const int64_t ld = nb * p;
    const T* colp = x + n0 * c * img;
    if (!pointwise) {
      im2col(g, x + n0 * c * img, c, nb, col.get());
      colp = col.get();
    }
    T* out = nb == 1 ? y + n0 * m * p : tmp.get();
    grouped_gemm(w, colp, out, group, mg, cg * k, ld);
    if (nb == 1) {
      if (!bias) continue;
#pragma omp parallel for if (m * p > (1 << 18))
      for (int64_t mi = 0; mi < m; ++mi) {
        T* row = out + mi * p;
        for (int64_t j = 0; j < p; ++j) row[j] += bias[mi];
      }
      continue;
    }
    for_each_output(tmp.get(), p, bias, y + n0 * m * p, nb, m, p, [&](const T* src, T* dst, T bv) {
      for (int64_t j = 0; j < p; ++j) dst[j] = src[j] + bv;
    });
  }
}

template <typename T>
void conv_transpose(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y, int64_t n,
                    int64_t c, int64_t m, int64_t group) {
  const int64_t k = g.kernel_size(), p = g.cols_size(), img = g.image_size();
  const int64_t cg = c / group, mg = m / group;
  const auto col = std::make_unique_for_overwrite<T[]>(mg * k * p);
  for (int64_t i = 0; i < n; ++i) {
    T* yi = y + i * m * img;
    for (int64_t mi = 0; mi < m; ++mi) {
      std::fill(yi + mi * img, yi + (mi + 1) * img, bias ? bias[mi] : T(0));
    }
    for (int64_t gi = 0; gi < group; ++gi) {
      // col[mg*k, p] = w_g^T [mg*k, cg] x x_g [cg, p]; w_g is [cg, mg*k].
      gemm(true, false, mg * k, p, cg, T(1), w + gi * cg * mg * k, mg * k,
           x + (i * c + gi * cg) * p, p, T(0), col.get(), p);
      col2im(g, col.get(), mg, yi + gi * mg * img);
    }
  }
}

#define AMPC_INSTANTIATE(T)                                                                   \
  template void im2col<T>(const ConvGeom&, const T*, int64_t, int64_t, T*);                   \
  template void col2im<T>(const ConvGeom&, const T*, int64_t, T*);                            \
  template void conv_forward<T>(const ConvGeom&, const T*, const T*, const T*, T*, int64_t,   \
                                int64_t, int64_t, int64_t);                                   \
  template void conv_transpose<T>(const ConvGeom&, const T*, const T*, const T*, T*, int64_t, \
                                  int64_t, int64_t, int64_t);
AMPC_INSTANTIATE(float)
AMPC_INSTANTIATE(double)
#undef AMPC_INSTANTIATE

}  // namespace ampc::kernels::cpu
