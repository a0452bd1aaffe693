// CPU operators of the reduction family (Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax,
// SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss) on hand-built plan steps, against
// numpy-style references computed here in double.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

#include "tests/unit/op_test_helpers.h"

namespace ampc::rt::cpu {
namespace {

using namespace optest;  // NOLINT
using ::testing::HasSubstr;
constexpr DType F32 = DType::kFloat32;
constexpr DType I64 = DType::kInt64;

// Groups the elements of x by their position outside `axes` (all axes when empty) and
// applies `kind` to each group, in double.
std::vector<double> ref_reduce(const std::vector<double>& x, const std::vector<int64_t>& dims,
                               std::vector<int64_t> axes, const std::string& kind) {
  const size_t rank = dims.size();
  std::vector<bool> red(rank, axes.empty());
  for (int64_t a : axes) red[a < 0 ? a + rank : a] = true;
  int64_t groups = 1;
  for (size_t i = 0; i < rank; ++i)
    if (!red[i]) groups *= dims[i];
  std::vector<std::vector<double>> members(groups);
  for (size_t j = 0; j < x.size(); ++j) {
    int64_t rest = static_cast<int64_t>(j), out = 0, scale = 1;
    for (size_t d = rank; d-- > 0;) {
      const int64_t coord = rest % dims[d];
      rest /= dims[d];
      if (!red[d]) {
        out += coord * scale;
        scale *= dims[d];
      }
    }
    members[out].push_back(x[j]);
  }
  std::vector<double> y;
  for (const auto& g : members) {
    double acc = kind == "prod" ? 1 : 0;
    double mx = -std::numeric_limits<double>::infinity(), mn = -mx;
    for (double v : g) {
      mx = std::max(mx, v);
      mn = std::min(mn, v);
    }
    for (double v : g) {
      if (kind == "prod")
        acc *= v;
      else if (kind == "l1")
        acc += std::abs(v);
      else if (kind == "l2" || kind == "sumsquare")
        acc += v * v;
      else if (kind == "logsumexp")
        acc += std::exp(v - mx);
      else
        acc += v;
    }
    if (kind == "mean") acc /= static_cast<double>(g.size());
    if (kind == "max") acc = mx;
    if (kind == "min") acc = mn;
    if (kind == "l2") acc = std::sqrt(acc);
    if (kind == "logsum") acc = std::log(acc);
    if (kind == "logsumexp") acc = mx + std::log(acc);
    y.push_back(acc);
  }
  return y;
}

TEST(CpuReduction, ReduceSumAxesInputKeepdimsAndNoop) {
  const std::vector<int64_t> dims = {2, 3, 4};
  const auto xv = pseudo_random(24, 1);
  const Tensor x = make(F32, dims, xv);
  auto y = run("ReduceSum", {x, make(I64, {1}, {1})}, {}, 1, 13)[0];
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 1, 4}));
  expect_close(values(y), ref_reduce(xv, dims, {1}, "sum"), 1e-6);
  auto flat = run("ReduceSum", {x, make(I64, {1}, {-1})}, {attr_i("keepdims", 0)}, 1, 13)[0];
  EXPECT_EQ(flat.shape(), (std::vector<int64_t>{2, 3}));
  expect_close(values(flat), ref_reduce(xv, dims, {2}, "sum"), 1e-6);
  // No axes: everything, or nothing with noop_with_empty_axes.
  auto all = run("ReduceSum", {x}, {}, 1, 13)[0];
  EXPECT_EQ(all.shape(), (std::vector<int64_t>{1, 1, 1}));
  expect_close(values(all), ref_reduce(xv, dims, {}, "sum"), 1e-5);
  auto noop =
      run("ReduceSum", {x, make(I64, {0}, {})}, {attr_i("noop_with_empty_axes", 1)}, 1, 13)[0];
  EXPECT_EQ(noop.shape(), dims);
  EXPECT_EQ(values(noop), values(x));
}

TEST(CpuReduction, EveryKindOverSeveralAxesMatchesReference) {
  const std::vector<int64_t> dims = {3, 2, 4, 5};
  auto xv = pseudo_random(120, 2);
  for (auto& v : xv) v += 1.5;  // positive: log and prod stay tame
  const Tensor x = make(DType::kFloat64, dims, xv);
  const std::vector<std::pair<std::string, std::string>> kinds = {{"ReduceSum", "sum"},
                                                                  {"ReduceMean", "mean"},
                                                                  {"ReduceProd", "prod"},
                                                                  {"ReduceMax", "max"},
                                                                  {"ReduceMin", "min"},
                                                                  {"ReduceL1", "l1"},
                                                                  {"ReduceL2", "l2"},
                                                                  {"ReduceLogSum", "logsum"},
                                                                  {"ReduceLogSumExp", "logsumexp"},
                                                                  {"ReduceSumSquare", "sumsquare"}};
  // Contiguous, leading, trailing, and split axes (the last needs a permutation; {0, 2, 3},
  // BatchNorm's sums over N and H*W, has a path of its own for Sum and Mean).
  const std::vector<std::vector<int64_t>> axis_sets = {{1, 2}, {0},       {3},         {0, 2},
                                                       {1, 3}, {0, 2, 3}, {0, 1, 2, 3}};
  for (const auto& [op, kind] : kinds) {
    for (const auto& axes : axis_sets) {
      // Before opset 18 (13 for ReduceSum) the axes are an attribute.
      const auto y = op == "ReduceSum"
                         ? run(op,
                               {x, make(I64, {static_cast<int64_t>(axes.size())},
                                        std::vector<double>(axes.begin(), axes.end()))},
                               {attr_i("keepdims", 0)}, 1, 13)[0]
                         : run(op, {x}, {attr_ints("axes", axes), attr_i("keepdims", 0)}, 1, 13)[0];
      SCOPED_TRACE(op + " over " + std::to_string(axes.size()) + " axes starting at " +
                   std::to_string(axes[0]));
      expect_close(values(y), ref_reduce(xv, dims, axes, kind), 1e-12);
    }
  }
}

TEST(CpuReduction, IntegerAndSixteenBitReductions) {
  const Tensor xi = make(I64, {2, 3}, {1, -7, 3, 4, 5, 6});
  EXPECT_EQ(values(run("ReduceSum", {xi, make(I64, {1}, {1})}, {attr_i("keepdims", 0)}, 1, 13)[0]),
            (std::vector<double>{-3, 15}));
  EXPECT_EQ(values(run("ReduceMax", {make(DType::kInt32, {2, 3}, {1, -7, 3, 4, 5, 6})},
                       {attr_ints("axes", {0})}, 1, 13)[0]),
            (std::vector<double>{4, 5, 6}));
  auto u8 = run("ReduceMin", {make(DType::kUInt8, {4}, {9, 200, 3, 77})}, {attr_i("keepdims", 0)},
                1, 13)[0];
  EXPECT_EQ(u8.dtype(), DType::kUInt8);
  EXPECT_EQ(values(u8), (std::vector<double>{3}));
  // fp16: summed in fp32 and rounded once (1 + 2^-11 four times = 1 + 2^-9: exact in fp16;
  // summing in fp16 would lose every 2^-11 term).
  const double tiny = 1.0 / 2048;
  auto h = run("ReduceSum", {make(DType::kFloat16, {5}, {1, tiny, tiny, tiny, tiny})},
               {attr_i("keepdims", 0)}, 1, 13)[0];
  EXPECT_EQ(h.dtype(), DType::kFloat16);
  EXPECT_EQ(values(h), (std::vector<double>{1 + 4 * tiny}));
  auto b = run("ReduceSumSquare", {make(DType::kBFloat16, {2}, {3, 4})}, {}, 1, 13)[0];
  EXPECT_EQ(b.dtype(), DType::kBFloat16);
  EXPECT_EQ(values(b), (std::vector<double>{25}));
}

TEST(CpuReduction, MaxAndMinPropagateNan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto y =
      run("ReduceMax", {make(F32, {2, 2}, {1, nan, nan, 2})}, {attr_ints("axes", {1})}, 1, 13)[0];
  EXPECT_TRUE(std::isnan(values(y)[0]));
  EXPECT_TRUE(std::isnan(values(y)[1]));
}

TEST(CpuReduction, ArgMaxArgMin) {
  const Tensor x = make(F32, {2, 3}, {1, 5, 5, 7, 0, 7});
  auto a = run("ArgMax", {x}, {attr_i("axis", 1)}, 1, 13)[0];
  EXPECT_EQ(a.dtype(), I64);
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(values(a), (std::vector<double>{1, 0}));
  auto last =
      run("ArgMax", {x},
          {attr_i("axis", -1), attr_i("keepdims", 0), attr_i("select_last_index", 1)}, 1, 13)[0];
  EXPECT_EQ(last.shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(values(last), (std::vector<double>{2, 2}));
  auto mn = run("ArgMin", {x}, {attr_i("axis", 0)}, 1, 13)[0];
  EXPECT_EQ(mn.shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(values(mn), (std::vector<double>{0, 1, 0}));
  EXPECT_EQ(values(run("ArgMin", {make(DType::kInt32, {3}, {4, -2, -2})},
                       {attr_i("select_last_index", 1)}, 1, 13)[0]),
            (std::vector<double>{2}));
}

// A NaN is the maximum and the minimum, the first one chosen: torch.argmax and torch.argmin
// of [1, nan, 3, nan] are both 1; of [nan, 5] both 0.
TEST(CpuReduction, ArgMaxArgMinChooseTheFirstNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = make(F32, {2, 4}, {1, nan, 3, nan, nan, 5, -1, 7});
  for (const char* op : {"ArgMax", "ArgMin"}) {
    EXPECT_EQ(values(run(op, {x}, {attr_i("axis", 1)}, 1, 13)[0]), (std::vector<double>{1, 0}))
        << op;
    EXPECT_EQ(values(run(op, {x}, {attr_i("axis", 1), attr_i("select_last_index", 1)}, 1, 13)[0]),
              (std::vector<double>{3, 0}))
        << op;
  }
}

// softmax / log-softmax of x [outer, n, inner] along n, in double.
std::vector<double> ref_softmax(const std::vector<double>& x, int64_t outer, int64_t n,
                                int64_t inner, bool log) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double m = -INFINITY, s = 0;
      for (int64_t r = 0; r < n; ++r) m = std::max(m, x[(o * n + r) * inner + i]);
      for (int64_t r = 0; r < n; ++r) s += std::exp(x[(o * n + r) * inner + i] - m);
      for (int64_t r = 0; r < n; ++r) {
        const double v = x[(o * n + r) * inner + i] - m;
        y[(o * n + r) * inner + i] = log ? v - std::log(s) : std::exp(v) / s;
      }
    }
  return y;
}

TEST(CpuReduction, SoftmaxAlongOneAxisFromOpset13) {
  const auto xv = pseudo_random(2 * 3 * 4, 10);
  const Tensor x = make(F32, {2, 3, 4}, xv);
  expect_close(values(run("Softmax", {x}, {attr_i("axis", 1)}, 1, 13)[0]),
               ref_softmax(xv, 2, 3, 4, false), 1e-6);
  expect_close(values(run("Softmax", {x}, {}, 1, 13)[0]), ref_softmax(xv, 6, 4, 1, false), 1e-6);
  expect_close(values(run("LogSoftmax", {x}, {attr_i("axis", 0)}, 1, 13)[0]),
               ref_softmax(xv, 1, 2, 12, true), 1e-6);
}

TEST(CpuReduction, SoftmaxCoercesTo2dBeforeOpset13) {
  const auto xv = pseudo_random(2 * 3 * 4, 11);
  const Tensor x = make(F32, {2, 3, 4}, xv);
  // Default axis 1: rows of 3 * 4.
  expect_close(values(run("Softmax", {x}, {}, 1, 11)[0]), ref_softmax(xv, 2, 12, 1, false), 1e-6);
  expect_close(values(run("LogSoftmax", {x}, {attr_i("axis", -1)}, 1, 11)[0]),
               ref_softmax(xv, 6, 4, 1, true), 1e-6);
  auto h = run("Hardmax", {make(F32, {2, 2, 2}, {1, 3, 3, 0, 2, 2, 2, 2})}, {}, 1, 11)[0];
  EXPECT_EQ(values(h), (std::vector<double>{0, 1, 0, 0, 1, 0, 0, 0}));
}

TEST(CpuReduction, LogSoftmaxOfLargeNumbersAndHardmaxAxis) {
  auto y = run("LogSoftmax", {make(F32, {1, 3}, {10000, 10001, 10002})}, {}, 1, 13)[0];
  expect_close(values(y), ref_softmax({0, 1, 2}, 1, 3, 1, true), 1e-6);
  auto h = run("Hardmax", {make(F32, {2, 2}, {1, 5, 3, 2})}, {attr_i("axis", 0)}, 1, 13)[0];
  EXPECT_EQ(values(h), (std::vector<double>{0, 1, 1, 0}));
}

TEST(CpuReduction, SoftmaxHalfRoundsFloatResultOnce) {
  const auto xv = pseudo_random(3 * 16, 12);
  const Tensor xh = make(DType::kFloat16, {3, 16}, xv);
  auto yh = run("Softmax", {xh}, {}, 1, 13)[0];
  auto yf = run("Softmax", {make(F32, {3, 16}, values(xh))}, {}, 1, 13)[0];
  ASSERT_EQ(yh.dtype(), DType::kFloat16);
  const auto h = values(yh), f = values(yf);
  for (size_t i = 0; i < h.size(); ++i)
    EXPECT_EQ(h[i], half_to_float(float_to_half(static_cast<float>(f[i]))));
}

// -sum(w[t] * log_softmax(x)[t]) / sum(w[t]) over non-ignored targets of x [n, c, d].
double ref_sce_mean(const std::vector<double>& x, const std::vector<int64_t>& t, int64_t n,
                    int64_t c, int64_t d, const std::vector<double>& w, int64_t ignore) {
  const auto lp = ref_softmax(x, n, c, d, true);
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      const int64_t label = t[i * d + j];
      if (label == ignore) continue;
      const double wv = w.empty() ? 1.0 : w[label];
      num -= wv * lp[(i * c + label) * d + j];
      den += wv;
    }
  return num / den;
}

TEST(CpuReduction, SoftmaxCrossEntropyMeanWithIgnoreIndexAndWeights) {
  const auto xv = pseudo_random(4 * 5, 20);
  const std::vector<int64_t> t = {0, 4, -100, 2};
  const std::vector<double> w = {1, 0.5, 2, 1, 3};
  const Tensor x = make(F32, {4, 5}, xv), target = make(I64, {4}, {0, 4, -100, 2});
  auto plain = run("SoftmaxCrossEntropyLoss", {x, target}, {attr_i("ignore_index", -100)}, 2, 13);
  EXPECT_EQ(plain[0].shape(), (std::vector<int64_t>{}));
  expect_close(values(plain[0]), {ref_sce_mean(xv, t, 4, 5, 1, {}, -100)}, 1e-6);
  expect_close(values(plain[1]), ref_softmax(xv, 4, 5, 1, true), 1e-6);
  auto weighted = run("SoftmaxCrossEntropyLoss", {x, target, make(F32, {5}, w)},
                      {attr_i("ignore_index", -100)}, 1, 13);
  expect_close(values(weighted[0]), {ref_sce_mean(xv, t, 4, 5, 1, w, -100)}, 1e-6);
}

TEST(CpuReduction, SoftmaxCrossEntropyNdNoReduction) {
  // scores [2, 3, 2, 2], targets [2, 2, 2]: per-position losses.
  const auto xv = pseudo_random(24, 21);
  const std::vector<double> tv = {0, 1, 2, 1, 2, 2, 0, 0};
  auto out = run("SoftmaxCrossEntropyLoss",
                 {make(F32, {2, 3, 2, 2}, xv), make(DType::kInt32, {2, 2, 2}, tv)},
                 {attr_s("reduction", "none")}, 1, 13)[0];
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{2, 2, 2}));
  const auto lp = ref_softmax(xv, 2, 3, 4, true);
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      want.push_back(-lp[(i * 3 + static_cast<int>(tv[i * 4 + j])) * 4 + j]);
  expect_close(values(out), want, 1e-6);
}

TEST(CpuReduction, NegativeLogLikelihoodSumAndErrors) {
  const Tensor logp = make(F32, {2, 3}, {-1, -2, -3, -4, -5, -6});
  auto s =
      run("NegativeLogLikelihoodLoss", {logp, make(I64, {2}, {2, 0}), make(F32, {3}, {1, 1, 0.5})},
          {attr_s("reduction", "sum")}, 1, 13)[0];
  expect_close(values(s), {3 * 0.5 + 4}, 1e-6);
  auto m = run("NegativeLogLikelihoodLoss", {logp, make(I64, {2}, {2, 1})},
               {attr_i("ignore_index", 1)}, 1, 13)[0];
  expect_close(values(m), {3}, 1e-6);
  EXPECT_THAT(run_error("NegativeLogLikelihoodLoss", {logp, make(I64, {2}, {3, 0})}, {}, 1, 13),
              HasSubstr("target 3 at position 0 is not a class index in [0, 3)"));
  EXPECT_THAT(run_error("NegativeLogLikelihoodLoss", {logp, make(I64, {2}, {0, 0})},
                        {attr_s("reduction", "avg")}, 1, 13),
              HasSubstr("attribute 'reduction' value 'avg' is not supported"));
}

}  // namespace
}  // namespace ampc::rt::cpu
