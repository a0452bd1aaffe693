#include "kernels/cpu/blas.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/dnnl_matmul.h"

namespace ampc::kernels::cpu {
namespace {

// One thread pool: OpenBLAS runs single-threaded and large GEMMs are split across the
// OpenMP threads the rest of the backend uses. OpenBLAS's own (pthreads) workers spin after
// each call and would fight the OpenMP workers for the same cores.
bool configure_blas() {
  openblas_set_num_threads(1);
  return true;
}

[[maybe_unused]] const bool kBlasConfigured = configure_blas();

// Below this many multiply-adds a GEMM runs on the calling thread.
constexpr int64_t kParallelGemm = int64_t{1} << 20;

inline void call_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
                      const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void call_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda,
                      const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// C = alpha op(A) op(B) + beta C, split into column blocks (or row blocks when C is tall)
// across the OpenMP threads when large enough and not already inside a parallel region.
template <typename T>
void gemm_parallel(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                   int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool split_rows = m > n;
  const int64_t extent = split_rows ? m : n;
  const int64_t parts = std::min<int64_t>(threads, extent / 16);
  if (parts <= 1 || m * n * k < kParallelGemm) {
    return call_gemm(ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
                     a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
                     static_cast<int>(ldc));
  }
  // Blocks of a multiple of 16 rows / columns.
  const int64_t block = ((extent + parts - 1) / parts + 15) & ~int64_t{15};
#pragma omp parallel for num_threads(parts)
  for (int64_t part = 0; part < parts; ++part) {
    const int64_t lo = part * block, hi = std::min(extent, lo + block);
    if (lo >= hi) continue;
    if (split_rows) {  // rows lo..hi of op(A) and C
      call_gemm(ta, tb, static_cast<int>(hi - lo), static_cast<int>(n), static_cast<int>(k), alpha,
                a + (ta ? lo : lo * lda), static_cast<int>(lda), b, static_cast<int>(ldb), beta,
                c + lo * ldc, static_cast<int>(ldc));
    } else {  // columns lo..hi of op(B) and C
      call_gemm(ta, tb, static_cast<int>(m), static_cast<int>(hi - lo), static_cast<int>(k), alpha,
                a, static_cast<int>(lda), b + (tb ? lo * ldb : lo), static_cast<int>(ldb), beta,
                c + lo, static_cast<int>(ldc));
    }
  }
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  DnnlMatmul p;
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = lda;
  p.ldb = ldb;
  p.ldc = ldc;
  p.alpha = alpha;
  p.beta = beta;
  if (dnnl_matmul(p, a, b, c)) return;
  gemm_parallel(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void dgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
           const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
           int64_t ldc) {
  gemm_parallel(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace ampc::kernels::cpu
