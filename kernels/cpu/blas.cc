#include "kernels/cpu/blas.h"

#include <cblas.h>

#include <cctype>
#include <cstdlib>
#include <string>

// OpenBLAS (Debian builds it with DYNAMIC_ARCH) picks its kernels from the CPUID family and
// model. Virtual machines that report a generic model ("Intel Xeon Processor") make it fall
// back to its Prescott (SSE3) kernels, 3-4x slower than the AVX2 / AVX-512 ones the CPU
// has. These internal entry points let the choice be redone; weak, so that another BLAS
// still links (the fix is then skipped).
extern "C" {
char* openblas_get_corename(void) __attribute__((weak));
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace ampc::kernels::cpu {
namespace {

// When the user did not choose (OPENBLAS_CORETYPE unset), the CPU has AVX2 and OpenBLAS
// picked a pre-AVX2 core, select again through OpenBLAS's own feature-based fallback: an
// unknown core name makes it choose by AVX-512 / AVX2 / AVX support (with the OS checks).
// Runs once, at program start, before any BLAS call.
bool choose_blas_kernels() {
  if (!openblas_get_corename || !gotoblas_dynamic_init || !gotoblas_dynamic_quit) return false;
  if (std::getenv("OPENBLAS_CORETYPE") || !__builtin_cpu_supports("avx2")) return false;
  std::string core = openblas_get_corename();
  for (char& ch : core) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* old : {"unknown", "katmai", "coppermine", "northwood", "prescott", "banias",
                          "atom", "core2", "penryn", "dunnington", "nehalem", "sandybridge"}) {
    if (core == old) {
      setenv("OPENBLAS_CORETYPE", "ampc-feature-detect", 1);
      gotoblas_dynamic_quit();
      gotoblas_dynamic_init();
      unsetenv("OPENBLAS_CORETYPE");
      return true;
    }
  }
  return false;
}

[[maybe_unused]] const bool kBlasKernelsChosen = choose_blas_kernels();

}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

void dgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
           const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

}  // namespace ampc::kernels::cpu
