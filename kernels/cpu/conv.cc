#include "kernels/cpu/conv.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/matmul.h"

namespace ampc::kernels::cpu {
namespace {

// Upper bound on the elements of one im2col buffer; the batch is processed in chunks that fit.
constexpr int64_t kMaxColElements = int64_t{1} << 22;

// Splits a flat kernel offset into its three kernel indices.
inline void kernel_index(const ConvGeom& g, int64_t kk, int64_t* k0, int64_t* k1, int64_t* k2) {
  *k2 = kk % g.kernel[2];
  *k1 = (kk / g.kernel[2]) % g.kernel[1];
  *k0 = kk / (g.kernel[2] * g.kernel[1]);
}

// The column range of the last dimension that reads inside the image, per kernel offset.
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
#pragma omp parallel for if (rows * ld > (1 << 16))
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
#pragma omp parallel for if (channels * k * p > (1 << 16))
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

template <typename T>
void conv_forward(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y, int64_t n,
                  int64_t c, int64_t m, int64_t group) {
  const int64_t k = g.kernel_size(), p = g.cols_size(), img = g.image_size();
  const int64_t cg = c / group, mg = m / group;
  bool pointwise = k == 1 && img == p;
  for (int d = 0; d < 3; ++d) pointwise = pointwise && g.stride[d] == 1 && g.pad[d] == 0;
  // Small images are batched into one GEMM per group: [mg, cg*k] x [cg*k, nb*p].
  const int64_t per_image = std::max<int64_t>(c * k * p, 1);
  const int64_t chunk = pointwise ? 1 : std::clamp<int64_t>(kMaxColElements / per_image, 1, n);
  std::vector<T> col(pointwise ? 0 : c * k * chunk * p);
  std::vector<T> tmp(chunk > 1 ? m * chunk * p : 0);
  for (int64_t n0 = 0; n0 < n; n0 += chunk) {
    const int64_t nb = std::min(chunk, n - n0);
    const int64_t ld = nb * p;
    const T* colp = x + n0 * c * img;
    if (!pointwise) {
      im2col(g, x + n0 * c * img, c, nb, col.data());
      colp = col.data();
    }
    T* out = nb == 1 ? y + n0 * m * p : tmp.data();
    for (int64_t gi = 0; gi < group; ++gi) {
      gemm(false, false, mg, ld, cg * k, T(1), w + gi * mg * cg * k, cg * k,
           colp + gi * cg * k * ld, ld, T(0), out + gi * mg * ld, ld);
    }
    if (nb == 1) {
      if (!bias) continue;
#pragma omp parallel for if (m * p > (1 << 16))
      for (int64_t mi = 0; mi < m; ++mi) {
        T* row = out + mi * p;
        for (int64_t j = 0; j < p; ++j) row[j] += bias[mi];
      }
      continue;
    }
#pragma omp parallel for collapse(2) if (m * ld > (1 << 16))
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t mi = 0; mi < m; ++mi) {
        const T* src = tmp.data() + mi * ld + b * p;
        T* dst = y + ((n0 + b) * m + mi) * p;
        const T bv = bias ? bias[mi] : T(0);
        for (int64_t j = 0; j < p; ++j) dst[j] = src[j] + bv;
      }
    }
  }
}

template <typename T>
void conv_transpose(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y, int64_t n,
                    int64_t c, int64_t m, int64_t group) {
  const int64_t k = g.kernel_size(), p = g.cols_size(), img = g.image_size();
  const int64_t cg = c / group, mg = m / group;
  std::vector<T> col(mg * k * p);
  for (int64_t i = 0; i < n; ++i) {
    T* yi = y + i * m * img;
    for (int64_t mi = 0; mi < m; ++mi) {
      std::fill(yi + mi * img, yi + (mi + 1) * img, bias ? bias[mi] : T(0));
    }
    for (int64_t gi = 0; gi < group; ++gi) {
      // col[mg*k, p] = w_g^T [mg*k, cg] x x_g [cg, p]; w_g is [cg, mg*k].
      gemm(true, false, mg * k, p, cg, T(1), w + gi * cg * mg * k, mg * k,
           x + (i * c + gi * cg) * p, p, T(0), col.data(), p);
      col2im(g, col.data(), mg, yi + gi * mg * img);
    }
  }
}

#define AMPC_INSTANTIATE(T)                                                                      \
  template void im2col<T>(const ConvGeom&, const T*, int64_t, int64_t, T*);                      \
  template void col2im<T>(const ConvGeom&, const T*, int64_t, T*);                               \
  template void conv_forward<T>(const ConvGeom&, const T*, const T*, const T*, T*, int64_t,      \
                                int64_t, int64_t, int64_t);                                      \
  template void conv_transpose<T>(const ConvGeom&, const T*, const T*, const T*, T*, int64_t,    \
                                  int64_t, int64_t, int64_t);
AMPC_INSTANTIATE(float)
AMPC_INSTANTIATE(double)
#undef AMPC_INSTANTIATE

}  // namespace ampc::kernels::cpu
