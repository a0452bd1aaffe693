#include "kernels/cpu/matmul.h"

namespace ampc::kernels::cpu {

template <typename T>
void gemm_naive(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a,
                int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc) {
  const int64_t a_row = trans_a ? 1 : lda, a_col = trans_a ? lda : 1;
  const int64_t b_row = trans_b ? 1 : ldb, b_col = trans_b ? ldb : 1;
#pragma omp parallel for if (m * n * k > (1 << 18))
  for (int64_t i = 0; i < m; ++i) {
    T* ci = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) ci[j] = T(0);
    for (int64_t p = 0; p < k; ++p) {
      const T av = a[i * a_row + p * a_col];
      const T* bp = b + p * b_row;
      for (int64_t j = 0; j < n; ++j) ci[j] += av * bp[j * b_col];
    }
  }
}

#define AMPC_INSTANTIATE(T)                                                                       \
  template void gemm_naive<T>(bool, bool, int64_t, int64_t, int64_t, const T*, int64_t, const T*, \
                              int64_t, T*, int64_t);
AMPC_INSTANTIATE(int32_t)
AMPC_INSTANTIATE(int64_t)
AMPC_INSTANTIATE(uint32_t)
AMPC_INSTANTIATE(uint64_t)
#undef AMPC_INSTANTIATE

}  // namespace ampc::kernels::cpu
