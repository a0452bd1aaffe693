// Row-major GEMM: C = alpha * op(A) * op(B) + beta * C. fp32 goes through oneDNN's matmul
// (dnnl_matmul.h); double, and what oneDNN does not serve, through OpenBLAS, which runs
// single-threaded with large products split across the OpenMP threads (see blas.cc).
// k == 0 is allowed (C = beta * C).
#pragma once

#include <cstdint>

namespace ampc::kernels::cpu {

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void dgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
           const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
           int64_t ldc);

}  // namespace ampc::kernels::cpu
