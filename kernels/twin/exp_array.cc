// exp_f (kernels/shared/rowwise_fp.h) over arrays on the CPU's vector units. Each lane runs
// exp_f's operations in its order: the same roundings (one per multiply and add, FMAs where
// exp_f calls fma_rn, round-to-nearest-even for rint) and the same out-of-range branches as
// selects, so every lane equals the scalar function bit for bit
// (tests/unit/exp_array_test.cc). The build targets plain x86-64, so the vector code is
// compiled for AVX-512 and for AVX2 + FMA by function attributes and picked at run time.
// GCC 12 warns about the deliberately undefined vectors inside its own AVX-512 intrinsics
// (a false positive, GCC bug 105593); the warning is off for the intrinsics' header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "kernels/twin/row_host.h"

namespace ampc::kernels::twin {
namespace {

// The constants of exp_f, in its order.
constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = -0.693359375f, kLn2Lo = 2.12194440e-4f;
constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
constexpr float kLo = -87.33654f, kHi = 88.72283f;

__attribute__((target("avx512f"))) inline __m512 pow2_512(__m512i e) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(127)), 23));
}

__attribute__((target("avx512f"))) inline __m512 exp16(__m512 x) {
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kP[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP[i]));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  // scale_pow2: n = a + b, a = n / 2 rounded toward zero, as C's integer division.
  const __m512i ni = _mm512_cvtps_epi32(n);
  const __m512i a = _mm512_srai_epi32(_mm512_add_epi32(ni, _mm512_srli_epi32(ni, 31)), 1);
  const __m512i b = _mm512_sub_epi32(ni, a);
  __m512 out = _mm512_mul_ps(_mm512_mul_ps(y, pow2_512(a)), pow2_512(b));
  out = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(kLo), _CMP_LT_OQ), out,
                             _mm512_setzero_ps());
  out = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(kHi), _CMP_GT_OQ), out,
                             _mm512_set1_ps(INFINITY));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), out, x);
}

__attribute__((target("avx512f"))) void exp_avx512(const float* x, int64_t n, float* out) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(out + j, exp16(_mm512_loadu_ps(x + j)));
  if (j < n) {
    const __mmask16 k = static_cast<__mmask16>((1u << (n - j)) - 1);
    _mm512_mask_storeu_ps(out + j, k, exp16(_mm512_maskz_loadu_ps(k, x + j)));
  }
}

__attribute__((target("avx2,fma"))) inline __m256 pow2_256(__m256i e) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
}

__attribute__((target("avx2,fma"))) inline __m256 exp8(__m256 x) {
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP[i]));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i a = _mm256_srai_epi32(_mm256_add_epi32(ni, _mm256_srli_epi32(ni, 31)), 1);
  const __m256i b = _mm256_sub_epi32(ni, a);
  __m256 out = _mm256_mul_ps(_mm256_mul_ps(y, pow2_256(a)), pow2_256(b));
  out =
      _mm256_blendv_ps(out, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(kLo), _CMP_LT_OQ));
  out = _mm256_blendv_ps(out, _mm256_set1_ps(INFINITY),
                         _mm256_cmp_ps(x, _mm256_set1_ps(kHi), _CMP_GT_OQ));
  return _mm256_blendv_ps(out, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

__attribute__((target("avx2,fma"))) void exp_avx2(const float* x, int64_t n, float* out) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(out + j, exp8(_mm256_loadu_ps(x + j)));
  for (; j < n; ++j) out[j] = sh::exp_f(x[j]);
}

void exp_scalar(const float* x, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = sh::exp_f(x[j]);
}

using ExpFn = void (*)(const float*, int64_t, float*);

ExpFn exp_for(ExpPath path) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  switch (path) {
    case ExpPath::kBest:
      return avx512 ? exp_avx512 : (avx2 ? exp_avx2 : exp_scalar);
    case ExpPath::kAvx512:
      return avx512 ? exp_avx512 : nullptr;
    case ExpPath::kAvx2:
      return avx2 ? exp_avx2 : nullptr;
    case ExpPath::kScalar:
      return exp_scalar;
  }
  return nullptr;
}

}  // namespace

void exp_array(const float* x, int64_t n, float* out) {
  static const ExpFn fn = exp_for(ExpPath::kBest);
  fn(x, n, out);
}

bool exp_array_on(ExpPath path, const float* x, int64_t n, float* out) {
  const ExpFn fn = exp_for(path);
  if (fn) fn(x, n, out);
  return fn != nullptr;
}

}  // namespace ampc::kernels::twin
