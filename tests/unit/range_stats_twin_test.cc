// ampc.RangeStats: the CUDA kernel's CPU twin (kernels/twin/range_stats.h) against the CPU
// operator (runtime/cpu/ops/range_stats_op.cc), bit for bit, on values spread over fp32's
// whole range (zeros, fp32 subnormals, fp16 flush / subnormal / normal / overflow, inf, NaN)
// in f32, f16 and bf16, with and without a scale, enabled and not; and both against counts
// made here from the values with plain comparisons.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/shared/range_stats.h"
#include "kernels/twin/range_stats.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::testing {
namespace {

namespace rs = kernels::range_stats;
using namespace rt::cpu::optest;  // NOLINT: make, run, values

std::vector<double> spread(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> exp(-140, 40), sign(-1, 1);
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t pick = rng() % 50;
    if (pick == 0)
      v[i] = 0.0;
    else if (pick == 1)
      v[i] = std::numeric_limits<double>::infinity();
    else if (pick == 2)
      v[i] = std::nan("");
    else
      v[i] = (sign(rng) < 0 ? -1 : 1) * std::exp2(exp(rng));
  }
  return v;
}

rt::Tensor flag(bool on) {
  rt::Tensor t(DType::kBool, {});
  t.data<bool>()[0] = on;
  return t;
}

rt::Tensor scalar(float s) {
  rt::Tensor t(DType::kFloat32, {});
  t.data<float>()[0] = s;
  return t;
}

std::vector<double> twin(const rt::Tensor& x, const rt::Tensor* enabled, const rt::Tensor* scale) {
  std::vector<double> out(rs::kSize, -1.0);
  std::vector<unsigned char> work(rs::kWorkBytes);
  kernels::twin::range_stats(x.dtype(), x.raw(), x.numel(), enabled ? enabled->raw() : nullptr,
                             scale ? scale->raw() : nullptr, out.data(), work.data());
  return out;
}

std::vector<double> op(const rt::Tensor& x, const rt::Tensor* enabled, const rt::Tensor* scale) {
  const auto outs =
      run("RangeStats", {x, enabled ? *enabled : rt::Tensor(), scale ? *scale : rt::Tensor()}, {},
          1, 1, "ampc");
  return values(outs[0]);
}

// Counts made from the tensor's values as doubles with the definitions of the op.
void expect_counts(const rt::Tensor& x, float scale, const std::vector<double>& got) {
  const std::vector<double> v = values(x);
  double cls[2][rs::kClasses] = {};
  double max_abs = 0, min_nz = 0;
  auto classify = [](double a) {
    if (std::isnan(a) || std::isinf(a)) return int{rs::kNonFinite};
    if (a == 0) return int{rs::kZero};
    if (a < std::ldexp(1.0, -24)) return int{rs::kFlush};
    if (a < std::ldexp(1.0, -14)) return int{rs::kSubnormal};
    if (a > 65504) return int{rs::kOverflow};
    return int{rs::kNormal};
  };
  for (double d : v) {
    const double a = std::fabs(d);
    ++cls[0][classify(a)];
    ++cls[1][classify(static_cast<double>(static_cast<float>(a) * scale))];
    if (a > 0 && std::isfinite(a)) {
      max_abs = std::max(max_abs, a);
      min_nz = min_nz == 0 ? a : std::min(min_nz, a);
    }
  }
  EXPECT_EQ(got[rs::kNumel], static_cast<double>(v.size()));
  EXPECT_EQ(got[rs::kMaxAbs], max_abs);
  EXPECT_EQ(got[rs::kMinNonzeroAbs], min_nz);
  EXPECT_EQ(got[rs::kScale], scale);
  for (int c = 0; c < rs::kClasses; ++c) {
    EXPECT_EQ(got[rs::kTrueClass + c], cls[0][c]) << "class " << c;
    EXPECT_EQ(got[rs::kScaledClass + c], cls[1][c]) << "scaled class " << c;
  }
  double hist = 0;
  for (int b = 0; b < rs::kHistBins; ++b) hist += got[rs::kHist + b];
  EXPECT_EQ(hist, v.size() - cls[0][rs::kZero] - cls[0][rs::kNonFinite]);
}

TEST(RangeStatsTwin, MatchesTheCpuOpBitForBit) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (size_t n : {size_t{1}, size_t{255}, size_t{4097}, size_t{300000}}) {
      const rt::Tensor x =
          make(dtype, {static_cast<int64_t>(n)}, spread(n, static_cast<uint32_t>(n)));
      for (float s : {1.0f, 65536.0f, 0x1p-10f}) {
        const rt::Tensor on = flag(true), sc = scalar(s);
        const auto a = twin(x, &on, &sc), b = op(x, &on, &sc);
        ASSERT_EQ(a, b) << dtype_name(dtype) << " n " << n << " scale " << s;
        expect_counts(x, s, a);
      }
      // No scale input: scale 1; no switch: enabled.
      EXPECT_EQ(twin(x, nullptr, nullptr), op(x, nullptr, nullptr));
      expect_counts(x, 1.0f, op(x, nullptr, nullptr));
    }
  }
}

TEST(RangeStatsTwin, DisabledWritesZerosAndReadsNothing) {
  const rt::Tensor x = make(DType::kFloat32, {1000}, spread(1000, 3));
  const rt::Tensor off = flag(false), sc = scalar(2.0f);
  const std::vector<double> zeros(rs::kSize, 0.0);
  EXPECT_EQ(twin(x, &off, &sc), zeros);
  EXPECT_EQ(op(x, &off, &sc), zeros);
}

TEST(RangeStatsTwin, HistogramBinsAreBinaryExponents) {
  // 1.0 (2^0), 3.0 (2^1), 2^-20, 2^-130 (an fp32 subnormal: bin 0)
  const rt::Tensor x =
      make(DType::kFloat32, {4}, {1.0, -3.0, std::ldexp(1.0, -20), std::ldexp(1.0, -130)});
  const auto s = op(x, nullptr, nullptr);
  EXPECT_EQ(s[rs::kHist + 127], 1);
  EXPECT_EQ(s[rs::kHist + 128], 1);
  EXPECT_EQ(s[rs::kHist + 107], 1);
  EXPECT_EQ(s[rs::kHist + 0], 1);
  EXPECT_EQ(rs::bin_exponent(107), -20);
}

TEST(RangeStatsTwin, RefusesBadSwitchAndScale) {
  const rt::Tensor x = make(DType::kFloat32, {3}, {1, 2, 3});
  EXPECT_NE(run_error("RangeStats", {x, x}, {}, 1, 1, "ampc").find("enabled must be a bool"),
            std::string::npos);
  EXPECT_NE(run_error("RangeStats", {x, flag(true), x}, {}, 1, 1, "ampc").find("scale must be"),
            std::string::npos);
}

}  // namespace
}  // namespace ampc::testing
