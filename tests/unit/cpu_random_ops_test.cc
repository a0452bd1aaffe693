// RandomUniform, RandomNormal and their *Like forms on the CPU backend
// (runtime/cpu/ops/random_ops.cc) against the distributions they promise: 200 000 draws'
// mean and variance within 5 standard errors, and for the normal the Kolmogorov-Smirnov
// distance to its CDF (computed here with erfc) below the 0.1% critical value and neighbours
// independent (the correlation of their squares); a `seed`
// draws the same values again and another seed others; the *Like forms take the input's
// shape and type, `dtype` another type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/half.h"
#include "tests/unit/step_test_helpers.h"

namespace ampc::rt::cpu {
namespace {

using testing::run_op;
using testing::set_float;
using testing::set_int;
using testing::set_ints;

constexpr int64_t kDraws = 200000;

std::vector<double> values(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    const auto k = static_cast<int64_t>(i);
    v[i] = t.dtype() == DType::kFloat16 ? half_to_float(t.data<Half>()[k]) : t.data<float>()[k];
  }
  return v;
}

void expect_moments(const std::vector<double>& v, double mean, double variance) {
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) s += (x - m) * (x - m);
  s /= static_cast<double>(v.size() - 1);
  const double n = static_cast<double>(v.size());
  EXPECT_NEAR(m, mean, 5 * std::sqrt(variance / n));
  EXPECT_NEAR(s, variance, 5 * variance * std::sqrt(2 / n));  // the sample variance's error
}

double correlation(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  double ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ma += a[i] / n;
    mb += b[i] / n;
  }
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += (a[i] - ma) * (b[i] - mb);
    aa += (a[i] - ma) * (a[i] - ma);
    bb += (b[i] - mb) * (b[i] - mb);
  }
  return ab / std::sqrt(aa * bb);
}

TEST(CpuRandomOps, UniformDrawsFillTheRange) {
  const auto y = run_op("RandomUniform", {}, 1, [](plan::Step& s) {
    set_ints(s, "shape", {kDraws});
    set_float(s, "low", -2);
    set_float(s, "high", 3);
  });
  ASSERT_EQ(y[0].dtype(), DType::kFloat32);
  const std::vector<double> v = values(y[0]);
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -2);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 3);
  expect_moments(v, 0.5, 25.0 / 12);
}

TEST(CpuRandomOps, NormalDrawsFollowTheNormalDistribution) {
  const auto y = run_op("RandomNormal", {}, 1, [](plan::Step& s) {
    set_ints(s, "shape", {kDraws});
    set_float(s, "mean", 1.5f);
    set_float(s, "scale", 0.5f);
  });
  std::vector<double> v = values(y[0]);
  expect_moments(v, 1.5, 0.25);
  // Neighbours independent: the correlation of their squared deviations near 0 (its standard
  // error is 1.5 / sqrt(n) for independent normals; draws sharing a uniform give about 0.06).
  std::vector<double> a, b;
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    a.push_back((v[i] - 1.5) * (v[i] - 1.5));
    b.push_back((v[i + 1] - 1.5) * (v[i + 1] - 1.5));
  }
  EXPECT_LT(std::fabs(correlation(a, b)), 6 * 1.5 / std::sqrt(static_cast<double>(kDraws)));
  std::sort(v.begin(), v.end());
  double distance = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double cdf = 0.5 * std::erfc(-(v[i] - 1.5) / (0.5 * std::sqrt(2.0)));
    const double n = static_cast<double>(v.size());
    distance = std::max({distance, std::fabs(cdf - static_cast<double>(i) / n),
                         std::fabs(cdf - static_cast<double>(i + 1) / n)});
  }
  EXPECT_LT(distance, 1.95 / std::sqrt(static_cast<double>(v.size())));
}

TEST(CpuRandomOps, LikeFormsTakeTheInputsShapeAndTypeAndSeedsRepeat) {
  Tensor x(DType::kFloat16, {3, 4});
  auto draw = [&](float seed, bool as_float) {
    return run_op("RandomNormalLike", {&x}, 1, [=](plan::Step& s) {
      set_float(s, "seed", seed);
      if (as_float) set_int(s, "dtype", static_cast<int64_t>(DType::kFloat32));
    })[0];
  };
  const Tensor a = draw(7, false);
  EXPECT_EQ(a.dtype(), DType::kFloat16);
  EXPECT_EQ(a.shape(), x.shape());
  EXPECT_EQ(values(a), values(draw(7, false)));
  EXPECT_NE(values(a), values(draw(8, false)));
  EXPECT_EQ(draw(7, true).dtype(), DType::kFloat32);
  const Tensor u = run_op("RandomUniformLike", {&x}, 1)[0];
  EXPECT_EQ(u.dtype(), DType::kFloat16);
  EXPECT_EQ(u.shape(), x.shape());
}

}  // namespace
}  // namespace ampc::rt::cpu
