// ampc.SoftmaxGrad, the backward of Softmax and LogSoftmax (the CPU op runs the CUDA kernel's
// twin, kernels/twin/softmax.cc): against the formulas evaluated in double on the same (rounded)
// inputs, and bit for bit against the kernel's order written out here with rowwise_tree.h's
// per-thread reference (row_reduce_host: thread partials, then the tree) for rows, and each
// column's rows in order for softmax over a middle axis.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/half.h"
#include "kernels/shared/float_math.h"
#include "kernels/shared/rowwise.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::rt::cpu {
namespace {

using optest::attr_i;
using Dims = std::vector<int64_t>;
namespace sh = ampc::kernels::shared;

using optest::count;
using optest::uniform;

struct Case {
  Dims shape;
  int64_t axis;
};
// Warp rows (7, 40, 128), block rows of 256 and 512 threads (1100, 5000), a row of one element,
// softmax over a middle axis (columns walked by a thread each) and over the first.
const Case kCases[] = {{{4, 5, 7}, -1}, {{3, 40}, 1},   {{2, 1100}, 1}, {{1, 5000}, -1},
                       {{6, 1}, 1},     {{64, 128}, 1}, {{3, 7, 9}, 1}, {{5, 4, 3}, 0}};

Tensor run_grad(const Tensor& dy, const Tensor& y, int64_t axis, bool log) {
  return optest::run("SoftmaxGrad", {dy, y}, {attr_i("axis", axis), attr_i("log", log)}, 1, 1,
                     "ampc")[0];
}

// Rows of the forward's axis: outer, n, inner.
struct Rows {
  int64_t outer, n, inner;
};
Rows rows_of(const Dims& shape, int64_t axis) {
  if (axis < 0) axis += static_cast<int64_t>(shape.size());
  return {count(Dims(shape.begin(), shape.begin() + axis)), shape[static_cast<size_t>(axis)],
          count(Dims(shape.begin() + axis + 1, shape.end()))};
}

// The formulas in double: softmax dx = y (dy - sum(dy y)); log-softmax dx = dy - exp(y) sum(dy).
std::vector<double> exact_grad(const Tensor& dy, const Tensor& y, Rows r, bool log) {
  const std::vector<double> yv = optest::values(y), dv = optest::values(dy);
  std::vector<double> dx(yv.size());
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t i = 0; i < r.inner; ++i) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * r.n + j) * r.inner + i); };
      double s = 0;
      for (int64_t j = 0; j < r.n; ++j) s += log ? dv[at(j)] : dv[at(j)] * yv[at(j)];
      for (int64_t j = 0; j < r.n; ++j)
        dx[at(j)] = log ? dv[at(j)] - std::exp(yv[at(j)]) * s : yv[at(j)] * (dv[at(j)] - s);
    }
  return dx;
}

double unit_of(DType t) {
  return t == DType::kFloat16 ? 0x1p-11 : t == DType::kBFloat16 ? 0x1p-8 : 0;
}

// |have - want| <= tol * the row scale (the largest |dy| times the largest |y| or exp(y), times
// n for the sum) + one rounding of the output type.
TEST(SoftmaxGrad, MatchesTheDoubleFormulas) {
  uint32_t seed = 900;
  for (const Case& c : kCases) {
    for (bool log : {false, true}) {
      for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + (log ? " log" : "") + " shape of " +
                     std::to_string(count(c.shape)) + " axis " + std::to_string(c.axis));
        // y as the forward leaves it: probabilities in [0, 1], log-probabilities in [-6, 0].
        const Tensor y =
            log ? uniform(t, c.shape, seed++, -6, 0) : uniform(t, c.shape, seed++, 0, 1);
        const Tensor dy = uniform(t, c.shape, seed++, -2, 2);
        const Rows r = rows_of(c.shape, c.axis);
        const Tensor got = run_grad(dy, y, c.axis, log);
        ASSERT_EQ(got.dtype(), t);
        ASSERT_EQ(got.shape(), c.shape);
        const std::vector<double> want = exact_grad(dy, y, r, log), hv = optest::values(got);
        const double tol = t == DType::kFloat64 ? 1e-13 : 1e-6;
        for (size_t k = 0; k < want.size(); ++k)
          ASSERT_LE(std::fabs(hv[k] - want[k]),
                    tol * 2 * static_cast<double>(r.n) + unit_of(t) * std::fabs(want[k]))
              << k << ": " << hv[k] << " vs " << want[k];
      }
    }
  }
}

// The kernel's order in fp32: a row's sum as a block reduces it (row_reduce_host), a column's in
// row order; each dx rounded once.
template <typename T>
void expect_kernel_order(const Tensor& dy, const Tensor& y, Rows r, bool log, const Tensor& got) {
  const T* yv = y.data<T>();
  const T* dv = dy.data<T>();
  auto ld = [](T v) { return sh::Elem<T>::load(v); };
  auto term = [&](size_t k) {
    return log ? ld(dv[k]) : sh::softmax_grad_term(ld(dv[k]), ld(yv[k]));
  };
  const sh::RowPlan plan = sh::row_plan(r.n);
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t i = 0; i < r.inner; ++i) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * r.n + j) * r.inner + i); };
      float s = 0.0f;
      if (r.inner == 1) {
        s = sh::row_reduce_host(
            plan, r.n, 0.0f, [&](float a, int64_t j) { return sh::add(a, term(at(j))); },
            [](float a, float b) { return sh::add(a, b); });
      } else {
        for (int64_t j = 0; j < r.n; ++j) s = sh::add(s, term(at(j)));
      }
      for (int64_t j = 0; j < r.n; ++j) {
        const float d = ld(dv[at(j)]), v = ld(yv[at(j)]);
        const T want =
            sh::Elem<T>::store(log ? sh::log_softmax_grad_value(d, kernels::fmath::exp_f32(v), s)
                                   : sh::softmax_grad_value(d, v, s));
        ASSERT_EQ(std::memcmp(&got.data<T>()[at(j)], &want, sizeof(T)), 0)
            << "row " << o << " column " << i << " element " << j;
      }
    }
}

TEST(SoftmaxGrad, IsTheKernelsOrderBitForBit) {
  uint32_t seed = 1900;
  for (const Case& c : kCases) {
    for (bool log : {false, true}) {
      const Rows r = rows_of(c.shape, c.axis);
      {
        SCOPED_TRACE(std::string("f32") + (log ? " log" : "") + " axis " + std::to_string(c.axis));
        const Tensor y = uniform(DType::kFloat32, c.shape, seed++, log ? -6 : 0, log ? 0 : 1);
        const Tensor dy = uniform(DType::kFloat32, c.shape, seed++, -2, 2);
        expect_kernel_order<float>(dy, y, r, log, run_grad(dy, y, c.axis, log));
      }
      {
        SCOPED_TRACE(std::string("bf16") + (log ? " log" : "") + " axis " + std::to_string(c.axis));
        const Tensor y = uniform(DType::kBFloat16, c.shape, seed++, log ? -6 : 0, log ? 0 : 1);
        const Tensor dy = uniform(DType::kBFloat16, c.shape, seed++, -2, 2);
        expect_kernel_order<BFloat16>(dy, y, r, log, run_grad(dy, y, c.axis, log));
      }
    }
  }
}

TEST(SoftmaxGrad, RefusesOperandsThatDoNotMatch) {
  const Tensor y = uniform(DType::kFloat32, {2, 3}, 1, 0, 1);
  EXPECT_THAT(optest::run_error("SoftmaxGrad", {uniform(DType::kFloat32, {3, 2}, 2, -1, 1), y},
                                {attr_i("axis", 1)}, 1, 1, "ampc"),
              ::testing::HasSubstr("does not match Y"));
  EXPECT_THAT(optest::run_error("SoftmaxGrad", {uniform(DType::kFloat64, {2, 3}, 3, -1, 1), y},
                                {attr_i("axis", 1)}, 1, 1, "ampc"),
              ::testing::HasSubstr("does not match Y"));
}

}  // namespace
}  // namespace ampc::rt::cpu
