// exp, erf and tanh in fp32, each defined once for every place that computes them: the CPU ops
// (runtime/cpu/ops/elementwise_math.cc), the row-wise kernels on both sides (softmax,
// log-softmax and cross-entropy: kernels/shared/rowwise.h, compiled by nvcc for the CUDA
// kernels and by g++ for their twins, and kernels/twin/exp_array.cc on the CPU's vector units)
// and the fused kernels, whose LLVM IR (kernels/codegen/ir_body.h) emits the same operations,
// in the same order, from these constants for the host and for NVPTX. So a fused kernel, the
// op it replaces, a CUDA kernel and its twin agree bit for bit. Branch-free (selects, no
// calls), so the loops around them vectorise: the C library's expf/erff/tanhf are scalar calls
// that no loop vectoriser can widen. Errors against the exact functions, checked over the floats by
// tests/unit/float_math_test.cc: exp within 2 ulp, erf within 3 ulp, tanh within 1.35 ulp.
//
// No fused multiply-add: each * and + rounds once. exp_f32 goes through rowwise_fp.h's add /
// sub / mul (the _rn intrinsics on the device, which nvcc never contracts); on the host the
// files that include this header are compiled without contraction, as the JIT builds its code.
#pragma once

#include <bit>
#include <cstdint>

#include "kernels/shared/hd.h"
#include "kernels/shared/rowwise_fp.h"

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
// Scalars for exp_f32 (device code may read a constexpr scalar, not an array's element), and
// the same values as an array for the IR emitter.
inline constexpr float kExpC7 = 1.0f / 5040, kExpC6 = 1.0f / 720, kExpC5 = 1.0f / 120,
                       kExpC4 = 1.0f / 24, kExpC3 = 1.0f / 6, kExpC2 = 0.5f, kExpC1 = 1.0f,
                       kExpC0 = 1.0f;
inline constexpr int kExpTerms = 8;
inline constexpr float kExpPoly[kExpTerms] = {kExpC7, kExpC6, kExpC5, kExpC4,
                                              kExpC3, kExpC2, kExpC1, kExpC0};

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

// tanh: x + x^3 P(x^2) below kTanhSmall (a least-squares fit of (tanh(x) - x) / x^3 on
// Chebyshev nodes of x^2, weighted by x^2); 1 - 2 / (exp(2|x|) + 1) with x's sign above, which
// reaches +-1 where exp overflows. Within 1.35 ulp of the exact function (every positive float
// checked: 1.343 at 0.6326, under 0.8 on the polynomial's side; odd, so the negatives follow);
// the C library's tanhf is closer but a scalar call.
inline constexpr float kTanhSmall = 0.625f;
inline constexpr int kTanhSmallTerms = 6;
inline constexpr float kTanhSmallPoly[kTanhSmallTerms] = {
    2.1457031834870577e-03f, -8.180629462003708e-03f, 2.1702131256461143e-02f,
    -5.394705384969711e-02f, 1.3333208858966827e-01f, -3.333333134651184e-01f};

// 2^k for k in [-126, 127], from its exponent bits.
AMPC_HD float pow2i(int32_t k) {
  return shared::from_bits(static_cast<uint32_t>(k + 127) << 23);
}

// Host only (erf): p = p * x + c per coefficient, each operation rounded once.
template <int N>
inline float horner(const float (&c)[N], float x) {
  float p = c[0];
  for (int i = 1; i < N; ++i) p = p * x + c[i];
  return p;
}

AMPC_HD float exp_f32(float x) {
  using shared::add;
  using shared::from_bits;
  using shared::mul;
  using shared::sub;
  using shared::to_bits;
  // The selects are on the bits (base/half.h's select_bits): GCC turns those into vector
  // selects, where it keeps a branch for a select between floats and the loop around
  // exp_f32 would not vectorise below AVX-512.
  float c = from_bits(select_bits(x < kExpLow, to_bits(kExpLow), to_bits(x)));
  c = from_bits(select_bits(c > kExpHigh, to_bits(kExpHigh), to_bits(c)));
  const float t = add(mul(c, kExpLog2e), kExpShift);
  const float n = sub(t, kExpShift);
  const int32_t ni = static_cast<int32_t>(to_bits(t)) - kExpShiftBits;
  const float r = sub(sub(c, mul(n, kExpLn2Hi)), mul(n, kExpLn2Lo));
  float p = kExpC7;  // horner(kExpPoly, r), written out for the device
  p = add(mul(p, r), kExpC6);
  p = add(mul(p, r), kExpC5);
  p = add(mul(p, r), kExpC4);
  p = add(mul(p, r), kExpC3);
  p = add(mul(p, r), kExpC2);
  p = add(mul(p, r), kExpC1);
  p = add(mul(p, r), kExpC0);
  // 2^n in two halves: each a normal float, and the product rounds once (subnormal results).
  const int32_t n1 = ni >> 1;
  const float y = mul(mul(p, pow2i(n1)), pow2i(ni - n1));
  // NaN in: the same NaN, quieted (sign and payload kept), set on the bits: arithmetic such as
  // x + x would leave the sign to the compiler, which may rewrite (-a) + (-a) as a * -2.
  const uint32_t xb = to_bits(x);
  const bool nan = (xb & 0x7fffffffu) > 0x7f800000u;
  return from_bits(select_bits(nan, xb | 0x00400000u, to_bits(y)));
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

// x == 0 keeps x's sign (the polynomial's x + (-0) would give +0 for -0); NaN comes back
// quiet.
inline float tanh_f32(float x) {
  const float a = std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0x7FFFFFFFu);
  const float s = x * x;
  const float small = x + (x * s) * horner(kTanhSmallPoly, s);
  const float large = 1.0f - 2.0f / (exp_f32(a + a) + 1.0f);
  const float y = a < kTanhSmall ? small : (x < 0.0f ? -large : large);
  return x != x ? x + x : (x == 0.0f ? x : y);
}

}  // namespace ampc::kernels::fmath
