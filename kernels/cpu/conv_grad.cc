#include "kernels/cpu/conv_grad.h"

#include <algorithm>
#include <memory>

#include "kernels/cpu/blas.h"

namespace ampc::kernels::cpu {
namespace {

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float* c, int64_t ldc) {
  sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 1.0f, c, ldc);
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
          const double* b, int64_t ldb, double* c, int64_t ldc) {
  dgemm(ta, tb, m, n, k, 1.0, a, lda, b, ldb, 1.0, c, ldc);
}

}  // namespace

template <typename T>
void conv_grad(const ConvGeom& g, const T* dy, const T* x, const T* w, T* dx, T* dw, T* db,
               int64_t n, int64_t c, int64_t m, int64_t group) {
  const int64_t k = g.kernel_size(), p = g.cols_size(), img = g.image_size();
  const int64_t cg = c / group, mg = m / group;
  // dx is the transposed convolution of dy with the same weights.
  if (dx) conv_transpose(g, dy, w, static_cast<const T*>(nullptr), dx, n, m, c, group);
  if (dw) {
    // dw_g[mg, cg * k] += dy_g[mg, p] x col_g[cg * k, p]^T, one image at a time.
    std::fill(dw, dw + m * cg * k, T(0));
    const auto col = std::make_unique_for_overwrite<T[]>(c * k * p);
    for (int64_t i = 0; i < n; ++i) {
      im2col(g, x + i * c * img, c, 1, col.get());
      for (int64_t gi = 0; gi < group; ++gi) {
        gemm(false, true, mg, cg * k, p, dy + (i * m + gi * mg) * p, p, col.get() + gi * cg * k * p,
             p, dw + gi * mg * cg * k, cg * k);
      }
    }
  }
  if (db) {
    std::fill(db, db + m, T(0));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t mi = 0; mi < m; ++mi) {
        const T* src = dy + (i * m + mi) * p;
        T sum = 0;
        for (int64_t j = 0; j < p; ++j) sum += src[j];
        db[mi] += sum;
      }
    }
  }
}

template void conv_grad<float>(const ConvGeom&, const float*, const float*, const float*, float*,
                               float*, float*, int64_t, int64_t, int64_t, int64_t);
template void conv_grad<double>(const ConvGeom&, const double*, const double*, const double*,
                                double*, double*, double*, int64_t, int64_t, int64_t, int64_t);

}  // namespace ampc::kernels::cpu
