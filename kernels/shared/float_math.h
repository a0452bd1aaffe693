// exp and erf in fp32, defined once for the CPU ops (runtime/cpu/ops/elementwise_math.cc)
// and the host JIT's fused kernels (kernels/codegen/ir_body.h emits the same operations, in
// the same order, from these constants), so a fused kernel and the op it replaces agree bit
// for bit. Branch-free (selects, no calls), so both vectorise: the C library's expf/erff are
// scalar calls that no loop vectoriser can widen. Errors against the exact functions, checked
// over every float by tests/unit/float_math_test.cc: exp within 2 ulp, erf within 3 ulp.
//
// No fused multiply-add: each * and + rounds once, here as in the JIT (which builds with
// FP contraction off); the files that include this header are compiled without contraction.
#pragma once

#include <bit>
#include <cstdint>

namespace ampc::kernels::fmath {

// exp(x) = 2^n * e^r, n = round(x / ln2), r = x - n ln2 (Cody-Waite: ln2 split in a part
// with few bits, so n * kLn2Hi is exact, and the rest).
inline constexpr float kExpLog2e = 1.44269502162933349609375f;
inline constexpr float kExpLn2Hi = 0.693145751953125f;
inline constexpr float kExpLn2Lo = 1.428606765330187045037746429443359375e-6f;
// Adding 1.5 * 2^23 rounds a float of magnitude below 2^22 to an integer, held in the low
// mantissa bits.
inline constexpr float kExpShift = 12582912.0f;
inline constexpr int32_t kExpShiftBits = 0x4B400000;
// Beyond these the result is 0 or infinity; clamping keeps n within two normal scalings.
inline constexpr float kExpLow = -104.0f, kExpHigh = 89.0f;
// e^r on [-ln2/2, ln2/2]: its Taylor polynomial of degree 7, highest coefficient first.
inline constexpr int kExpTerms = 8;
inline constexpr float kExpPoly[kExpTerms] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24,
                                              1.0f / 6,    0.5f,       1.0f,       1.0f};

// erf: x * P(x^2) below kErfSmall; 1 - exp(Q(|x|)) up to kErfOne (least-squares fits of
// erf(x) / x and log(erfc(x)) on Chebyshev nodes); +-1 beyond (erf(3.92) rounds to 1).
inline constexpr float kErfSmall = 0.921875f;
inline constexpr float kErfOne = 4.0f;
inline constexpr int kErfSmallTerms = 7;
inline constexpr float kErfSmallPoly[kErfSmallTerms] = {
    8.365006215e-05f, -8.141392027e-04f, 5.200905260e-03f, -2.685934119e-02f,
    1.128369421e-01f, -3.761263490e-01f, 1.128379226e+00f};
inline constexpr int kErfLargeTerms = 9;
inline constexpr float kErfLargePoly[kErfLargeTerms] = {
    1.613101858e-06f,  -4.557118518e-05f, 5.926017184e-04f,  -4.739417695e-03f, 2.636238001e-02f,
    -1.099740490e-01f, -6.319416165e-01f, -1.130164027e+00f, 3.025418264e-04f};

// 2^k for k in [-126, 127], from its exponent bits.
inline float pow2i(int32_t k) {
  return std::bit_cast<float>((k + 127) << 23);
}

template <int N>
inline float horner(const float (&c)[N], float x) {
  float p = c[0];
  for (int i = 1; i < N; ++i) p = p * x + c[i];
  return p;
}

inline float exp_f32(float x) {
  float c = x < kExpLow ? kExpLow : x;
  c = c > kExpHigh ? kExpHigh : c;
  const float t = c * kExpLog2e + kExpShift;
  const float n = t - kExpShift;
  const int32_t ni = std::bit_cast<int32_t>(t) - kExpShiftBits;
  const float r = (c - n * kExpLn2Hi) - n * kExpLn2Lo;
  const float p = horner(kExpPoly, r);
  // 2^n in two halves: each a normal float, and the product rounds once (subnormal results).
  const int32_t n1 = ni >> 1;
  const float y = p * pow2i(n1) * pow2i(ni - n1);
  return x != x ? x + x : y;  // NaN in, quiet NaN out
}

inline float erf_f32(float x) {
  const float a = std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0x7FFFFFFFu);
  const float small = x * horner(kErfSmallPoly, x * x);
  const float ac = a < kErfOne ? a : kErfOne;
  const float large = 1.0f - exp_f32(horner(kErfLargePoly, ac));
  const float signed_large = x < 0.0f ? -large : large;
  const float one = x < 0.0f ? -1.0f : 1.0f;
  const float y = a < kErfSmall ? small : (a < kErfOne ? signed_large : one);
  return x != x ? x + x : y;
}

}  // namespace ampc::kernels::fmath
