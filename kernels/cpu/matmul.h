// Row-major matrix products for every element type MatMul and Gemm accept:
// C = alpha * op(A) * op(B) + beta * C. float and double go through OpenBLAS; integer types
// use a plain loop that accumulates in the element type (wrapping, as numpy does).
#pragma once

#include <cstdint>

#include "kernels/cpu/blas.h"

namespace ampc::kernels::cpu {

inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                 const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
                 int64_t ldc) {
  dgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// C = op(A) * op(B) (C is overwritten). Instantiated for int32, int64, uint32, uint64.
template <typename T>
void gemm_naive(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a,
                int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc);

}  // namespace ampc::kernels::cpu
