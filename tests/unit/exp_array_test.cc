// The vectorised exp of the row kernels' host side (kernels/twin/exp_array.cc) against the one
// definition of exp that the CUDA kernels run (kernels/shared/float_math.h exp_f32): every code
// path the CPU has (AVX-512, AVX2, scalar) must give exp_f32's bits for every input,
// whatever its position in a vector (lengths that leave tails of every size).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/shared/float_math.h"
#include "kernels/twin/row_host.h"

namespace ampc::kernels::twin {
namespace {

// Inputs: every 257th fp32 bit pattern (all exponents, both signs, NaNs, infinities), the
// range where exp is finite and not 0 densely, and the edges of that range.
std::vector<float> inputs() {
  std::vector<float> v;
  for (uint64_t b = 0; b <= 0xffffffffull; b += 257) {
    const uint32_t u = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &u, 4);
    v.push_back(f);
  }
  for (int i = 0; i <= 400000; ++i) v.push_back(-90.0f + 180.0f * static_cast<float>(i) / 400000);
  for (float f : {-104.0f, -103.97f, 88.72283f, 89.0f, -0.0f, 0.0f, INFINITY, -INFINITY, NAN}) {
    v.push_back(f);
    v.push_back(std::nextafter(f, -INFINITY));
    v.push_back(std::nextafter(f, INFINITY));
  }
  return v;
}

void expect_exp_f_bits(ExpPath path, const char* name) {
  const std::vector<float> x = inputs();
  std::vector<float> out(x.size());
  if (!exp_array_on(path, x.data(), static_cast<int64_t>(x.size()), out.data())) {
    GTEST_SKIP() << name << ": not on this CPU";
  }
  int failures = 0;
  for (size_t i = 0; i < x.size() && failures < 5; ++i) {
    const float want = fmath::exp_f32(x[i]);
    if (std::memcmp(&out[i], &want, 4) != 0) {
      ADD_FAILURE() << name << ": exp(" << x[i] << ") = " << out[i] << ", exp_f32 gives " << want;
      ++failures;
    }
  }
  // Every tail length, in place.
  for (int64_t n = 1; n <= 33; ++n) {
    std::vector<float> v(x.begin() + 1000, x.begin() + 1000 + n);
    exp_array_on(path, v.data(), n, v.data());
    for (int64_t j = 0; j < n; ++j) {
      const float want = fmath::exp_f32(x[1000 + j]);
      ASSERT_EQ(std::memcmp(&v[j], &want, 4), 0) << name << " length " << n << " lane " << j;
    }
  }
}

TEST(ExpArray, Avx512GivesExpFBits) {
  expect_exp_f_bits(ExpPath::kAvx512, "AVX-512");
}
TEST(ExpArray, Avx2GivesExpFBits) {
  expect_exp_f_bits(ExpPath::kAvx2, "AVX2");
}
TEST(ExpArray, ScalarGivesExpFBits) {
  expect_exp_f_bits(ExpPath::kScalar, "scalar");
}
TEST(ExpArray, BestPathGivesExpFBits) {
  expect_exp_f_bits(ExpPath::kBest, "best");
}

}  // namespace
}  // namespace ampc::kernels::twin
