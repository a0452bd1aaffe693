// The optimizer operators of "ai.onnx.preview.training" (Adagrad, Momentum, Adam) run
// through the operator registry on hand-built plan steps, against the ONNX spec's pseudo
// code evaluated here in double, element by element; and their refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::rt::cpu {
namespace {

using namespace optest;  // NOLINT
using ::testing::HasSubstr;
constexpr DType F32 = DType::kFloat32;
constexpr DType F64 = DType::kFloat64;
constexpr DType I64 = DType::kInt64;

// optest::run looks ops up in the default domain; these live in another one.
constexpr const char* kDomain = "ai.onnx.preview.training";

std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                           const std::vector<plan::Attribute>& attrs, int num_outputs) {
  return run(op, inputs, attrs, num_outputs, 1, kDomain);
}

std::string run_op_error(const std::string& op, const std::vector<Tensor>& inputs,
                         const std::vector<plan::Attribute>& attrs, int num_outputs) {
  return run_error(op, inputs, attrs, num_outputs, 1, kDomain);
}

Tensor scalar_r(DType dtype, double r) {
  return make(dtype, {}, {r});
}
Tensor scalar_t(int64_t t) {
  return make(I64, {}, {static_cast<double>(t)});
}

// Attributes are stored as float: the reference uses the same rounded coefficients.
double f(float v) {
  return static_cast<double>(v);
}

// Non-negative values for accumulated squares.
std::vector<double> positive(size_t n, uint32_t seed) {
  std::vector<double> v = pseudo_random(n, seed);
  for (double& x : v) x = std::fabs(x) + 0.05;
  return v;
}

TEST(CpuTrainingOptimizer, AdagradWithDecayAndNorm) {
  const float r = 0.1f, decay = 0.1f, eps = 1e-5f, norm = 0.01f;
  const int64_t t = 3;
  const Tensor x = make(F32, {2, 3}, pseudo_random(6, 1));
  const Tensor g = make(F32, {2, 3}, pseudo_random(6, 2));
  const Tensor h = make(F32, {2, 3}, positive(6, 3));
  const auto out = run_op(
      "Adagrad", {scalar_r(F32, r), scalar_t(t), x, g, h},
      {attr_f("decay_factor", decay), attr_f("epsilon", eps), attr_f("norm_coefficient", norm)}, 2);
  ASSERT_EQ(out[0].dtype(), F32);
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3}));
  const auto xv = values(x), gv = values(g), hv = values(h);
  std::vector<double> want_x, want_h;
  for (size_t i = 0; i < xv.size(); ++i) {
    const double r_adj = f(r) / (1.0 + static_cast<double>(t) * f(decay));
    const double g_reg = f(norm) * xv[i] + gv[i];
    const double h_new = hv[i] + g_reg * g_reg;
    want_x.push_back(xv[i] - r_adj * g_reg / (std::sqrt(h_new) + f(eps)));
    want_h.push_back(h_new);
  }
  expect_close(values(out[0]), want_x, 1e-6);
  expect_close(values(out[1]), want_h, 1e-6);
}

// Two tensors in one node (inputs R, T, X1, X2, G1, G2, V1, V2), fp64, T > 0 so beta counts.
TEST(CpuTrainingOptimizer, NesterovMomentumMultipleFp64) {
  const float alpha = 0.9f, beta = 0.5f, norm = 0.02f;
  const double r = 0.05;
  const int64_t t = 4;
  const std::vector<std::vector<int64_t>> shapes = {{3}, {2, 2}};
  std::vector<Tensor> xs, gs, vs;
  for (size_t j = 0; j < shapes.size(); ++j) {
    const size_t n = static_cast<size_t>(numel_of(shapes[j]));
    xs.push_back(make(F64, shapes[j], pseudo_random(n, 10 + j)));
    gs.push_back(make(F64, shapes[j], pseudo_random(n, 20 + j)));
    vs.push_back(make(F64, shapes[j], pseudo_random(n, 30 + j)));
  }
  const auto out =
      run_op("Momentum", {scalar_r(F64, r), scalar_t(t), xs[0], xs[1], gs[0], gs[1], vs[0], vs[1]},
             {attr_f("alpha", alpha), attr_f("beta", beta), attr_f("norm_coefficient", norm),
              attr_s("mode", "nesterov")},
             4);
  for (size_t j = 0; j < shapes.size(); ++j) {
    const auto xv = values(xs[j]), gv = values(gs[j]), vv = values(vs[j]);
    std::vector<double> want_x, want_v;
    for (size_t i = 0; i < xv.size(); ++i) {
      const double g_reg = f(norm) * xv[i] + gv[i];
      const double v_new = f(alpha) * vv[i] + f(beta) * g_reg;
      want_x.push_back(xv[i] - r * (g_reg + f(alpha) * v_new));
      want_v.push_back(v_new);
    }
    ASSERT_EQ(out[j].dtype(), F64);
    ASSERT_EQ(out[j].shape(), shapes[j]);
    expect_close(values(out[j]), want_x, 1e-14);
    expect_close(values(out[2 + j]), want_v, 1e-14);
  }
}

// T == 0: the spec uses 1 for beta in the first iteration. fp32 R with fp64 tensors.
TEST(CpuTrainingOptimizer, StandardMomentumFirstIteration) {
  const float alpha = 0.95f, beta = 0.1f, norm = 0.001f, r = 0.1f;
  const Tensor x = make(F64, {2}, {1.2, 2.8});
  const Tensor g = make(F64, {2}, {-0.94, -2.5});
  const Tensor v = make(F64, {2}, {1.7, 3.6});
  const auto out = run_op("Momentum", {scalar_r(F32, r), scalar_t(0), x, g, v},
                          {attr_f("alpha", alpha), attr_f("beta", beta),
                           attr_f("norm_coefficient", norm), attr_s("mode", "standard")},
                          2);
  std::vector<double> want_x, want_v;
  for (size_t i = 0; i < 2; ++i) {
    const double g_reg = f(norm) * values(x)[i] + values(g)[i];
    const double v_new = f(alpha) * values(v)[i] + 1.0 * g_reg;
    want_x.push_back(values(x)[i] - f(r) * v_new);
    want_v.push_back(v_new);
  }
  expect_close(values(out[0]), want_x, 1e-14);
  expect_close(values(out[1]), want_v, 1e-14);
}

TEST(CpuTrainingOptimizer, AdamWithBiasCorrectionAndBothNorms) {
  const float alpha = 0.85f, beta = 0.95f, eps = 1e-3f, norm = 0.01f, post = 0.02f;
  const double r = 0.01;
  const int64_t t = 5;
  const Tensor x = make(F64, {5}, pseudo_random(5, 41));
  const Tensor g = make(F64, {5}, pseudo_random(5, 42));
  const Tensor v = make(F64, {5}, pseudo_random(5, 43));
  const Tensor h = make(F64, {5}, positive(5, 44));
  const auto out = run_op("Adam", {scalar_r(F64, r), scalar_t(t), x, g, v, h},
                          {attr_f("alpha", alpha), attr_f("beta", beta), attr_f("epsilon", eps),
                           attr_f("norm_coefficient", norm), attr_f("norm_coefficient_post", post)},
                          3);
  const auto xv = values(x), gv = values(g), vv = values(v), hv = values(h);
  std::vector<double> want_x, want_v, want_h;
  for (size_t i = 0; i < xv.size(); ++i) {
    const double g_reg = f(norm) * xv[i] + gv[i];
    const double v_new = f(alpha) * vv[i] + (1 - f(alpha)) * g_reg;
    const double h_new = f(beta) * hv[i] + (1 - f(beta)) * g_reg * g_reg;
    const double td = static_cast<double>(t);  // T > 0: bias-corrected rate
    const double r_adj = r * std::sqrt(1 - std::pow(f(beta), td)) / (1 - std::pow(f(alpha), td));
    const double x_new = xv[i] - r_adj * v_new / (std::sqrt(h_new) + f(eps));
    want_x.push_back((1 - f(post)) * x_new);
    want_v.push_back(v_new);
    want_h.push_back(h_new);
  }
  expect_close(values(out[0]), want_x, 1e-14);
  expect_close(values(out[1]), want_v, 1e-14);
  expect_close(values(out[2]), want_h, 1e-14);
}

// Adam's defaults (alpha 0.9, beta 0.999, epsilon 1e-6) with fp32 tensors and T == 0 (no
// bias correction).
TEST(CpuTrainingOptimizer, AdamDefaultsFp32) {
  const Tensor x = make(F32, {1}, {1.0});
  const Tensor g = make(F32, {1}, {-1.0});
  const Tensor v = make(F32, {1}, {2.0});
  const Tensor h = make(F32, {1}, {0.5});
  const auto out = run_op("Adam", {scalar_r(F32, 0.1), scalar_t(0), x, g, v, h}, {}, 3);
  const double v_new = f(0.9f) * 2.0 + (1 - f(0.9f)) * -1.0;
  const double h_new = f(0.999f) * 0.5 + (1 - f(0.999f)) * 1.0;
  const double x_new = 1.0 - f(0.1f) * v_new / (std::sqrt(h_new) + f(1e-6f));
  expect_close(values(out[0]), {x_new}, 1e-6);
  expect_close(values(out[1]), {v_new}, 1e-6);
  expect_close(values(out[2]), {h_new}, 1e-6);
}

TEST(CpuTrainingOptimizer, Refusals) {
  const Tensor r = scalar_r(F32, 0.1), t = scalar_t(0);
  const Tensor a = make(F32, {2}, {1, 2}), b = make(F32, {3}, {1, 2, 3});
  const Tensor d = make(F64, {2}, {1, 2});
  const std::vector<plan::Attribute> momentum = {attr_f("alpha", 0.9f), attr_f("beta", 1.0f),
                                                 attr_f("norm_coefficient", 0.0f),
                                                 attr_s("mode", "standard")};
  EXPECT_THAT(run_op_error("Adagrad", {r, t, a, a}, {}, 2),
              HasSubstr("expects R, T and then 3 inputs (X, G, H) per optimized tensor, got 4"));
  EXPECT_THAT(run_op_error("Adam", {r, t, a, a, a, a}, {}, 2), HasSubstr("has 3 outputs"));
  EXPECT_THAT(run_op_error("Adagrad", {r, t, a, b, a}, {}, 2),
              HasSubstr("G of tensor 0 (input 3) is f32[3], but X of tensor 0 is f32[2]"));
  EXPECT_THAT(
      run_op_error("Momentum", {r, t, a, a, d}, momentum, 2),
      HasSubstr("V of tensor 0 (input 4) is f64[2], but X of tensor 0 is f32[2] (all tensors"));
  EXPECT_THAT(run_op_error("Momentum", {r, t, a, a, a}, {attr_s("mode", "standard")}, 2),
              HasSubstr("attribute 'alpha' is required"));
  auto bad_mode = momentum;
  bad_mode.back() = attr_s("mode", "heavy-ball");
  EXPECT_THAT(run_op_error("Momentum", {r, t, a, a, a}, bad_mode, 2),
              HasSubstr("attribute 'mode' must be \"standard\" or \"nesterov\""));
  EXPECT_THAT(run_op_error("Adagrad", {make(F32, {2}, {1, 2}), t, a, a, a}, {}, 2),
              HasSubstr("R must be a scalar, got f32[2]"));
  EXPECT_THAT(run_op_error("Adagrad", {r, make(F32, {}, {0}), a, a, a}, {}, 2),
              HasSubstr("T must be int64, got f32[]"));
  EXPECT_THAT(
      run_op_error("Adagrad", {r, t, make(I64, {1}, {1}), make(I64, {1}, {1}), make(I64, {1}, {1})},
                   {}, 2),
      HasSubstr("not supported"));
}

}  // namespace
}  // namespace ampc::rt::cpu
