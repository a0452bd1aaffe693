// kernels/shared/float_math.h's fp32 exp, erf and tanh (the CPU ops' and the host JIT's) against
// the C library in double: every 61st float (70 million, all exponents and signs), the
// special values, and the error bounds the header states.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/shared/float_math.h"

namespace ampc::kernels::fmath {
namespace {

// Distance from the exact value in units of the float spacing there.
double ulps(float got, double exact) {
  const float f = static_cast<float>(std::fabs(exact));
  const double unit =
      f == 0 ? std::ldexp(1.0, -149) : static_cast<double>(std::nextafter(f, INFINITY)) - f;
  return std::fabs(static_cast<double>(got) - exact) / unit;
}

TEST(FloatMath, ExpAndErfWithinTheirBoundsOverTheFloats) {
  double worst_exp = 0, worst_erf = 0;
  float at_exp = 0, at_erf = 0;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 61) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(b));
    if (std::isnan(x)) continue;
    const double e = std::exp(static_cast<double>(x));
    const double de = e > std::numeric_limits<float>::max()
                          ? (std::isinf(exp_f32(x)) ? 0.0 : INFINITY)
                          : ulps(exp_f32(x), e);
    const double df = ulps(erf_f32(x), std::erf(static_cast<double>(x)));
    if (de > worst_exp) worst_exp = de, at_exp = x;
    if (df > worst_erf) worst_erf = df, at_erf = x;
  }
  EXPECT_LE(worst_exp, 2.0) << "at " << at_exp;
  EXPECT_LE(worst_erf, 3.0) << "at " << at_erf;
}

TEST(FloatMath, TanhWithinItsBoundOverTheFloats) {
  double worst = 0;
  float at = 0;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 61) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(b));
    if (std::isnan(x)) continue;
    const double d = ulps(tanh_f32(x), std::tanh(static_cast<double>(x)));
    if (d > worst) worst = d, at = x;
  }
  EXPECT_LE(worst, 1.35) << "at " << at;
  // Both sides of the switch to the exponential form, densely.
  for (float x = 0.5f; x < 0.75f; x = std::nextafter(x, 1.0f)) {
    ASSERT_LE(ulps(tanh_f32(x), std::tanh(static_cast<double>(x))), 1.35) << x;
    ASSERT_EQ(tanh_f32(-x), -tanh_f32(x)) << x;
  }
}

TEST(FloatMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-0.0f), 1.0f);
  EXPECT_EQ(exp_f32(inf), inf);
  EXPECT_EQ(exp_f32(-inf), 0.0f);
  EXPECT_EQ(exp_f32(88.8f), inf);  // beyond the largest float
  EXPECT_GT(exp_f32(88.7f), 3.0e38f);
  EXPECT_EQ(exp_f32(-104.0f), 0.0f);
  EXPECT_GT(exp_f32(-103.0f), 0.0f);  // subnormal
  EXPECT_TRUE(std::isnan(exp_f32(nan)));
  EXPECT_EQ(std::bit_cast<uint32_t>(erf_f32(-0.0f)), std::bit_cast<uint32_t>(-0.0f));
  EXPECT_EQ(erf_f32(0.0f), 0.0f);
  EXPECT_EQ(erf_f32(inf), 1.0f);
  EXPECT_EQ(erf_f32(-inf), -1.0f);
  EXPECT_EQ(erf_f32(5.0f), 1.0f);
  EXPECT_EQ(erf_f32(-1e30f), -1.0f);
  EXPECT_TRUE(std::isnan(erf_f32(nan)));
  EXPECT_TRUE(std::isnan(erf_f32(-nan)));
  EXPECT_EQ(std::bit_cast<uint32_t>(tanh_f32(-0.0f)), std::bit_cast<uint32_t>(-0.0f));
  EXPECT_EQ(std::bit_cast<uint32_t>(tanh_f32(0.0f)), 0u);
  EXPECT_EQ(tanh_f32(inf), 1.0f);
  EXPECT_EQ(tanh_f32(-inf), -1.0f);
  EXPECT_EQ(tanh_f32(10.0f), 1.0f);
  EXPECT_EQ(tanh_f32(-1e30f), -1.0f);
  EXPECT_EQ(tanh_f32(1e-30f), 1e-30f);
  EXPECT_EQ(tanh_f32(-1e-40f), -1e-40f);  // subnormal
  EXPECT_TRUE(std::isnan(tanh_f32(nan)));
  EXPECT_TRUE(std::isnan(tanh_f32(-nan)));
}

}  // namespace
}  // namespace ampc::kernels::fmath
