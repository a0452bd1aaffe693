// Every gradient rule against central finite differences in fp64: a small graph around the
// op, loss = ReduceSum(y * R) with fixed random weights R, the gradients computed by the
// autodiff pass and run on the CPU backend, and each compared with
// (loss(p + h) - loss(p - h)) / 2h for every element of every parameter.
#include <gtest/gtest.h>

#include "base/error.h"
#include "passes/autodiff/autodiff.h"
#include "tests/passes/fd_check.h"

namespace ampc {
namespace {

using namespace ampc::fd;  // NOLINT: the test speaks the harness vocabulary

using passes::autodiff::attrs;
using passes::autodiff::GradBuilder;
using P = const std::vector<ir::Value*>&;

Case binary(const std::string& op, Shape a, Shape b, Shape out) {
  return {op + "_broadcast", {a, b}, out, [op, out](GradBuilder& g, P p) {
            return g.op(op, {p[0], p[1]}, f64(out));
          }};
}

Case unary(const std::string& op, double lo = -1.5, double hi = 1.5) {
  Case c{op, {{2, 3}}, {2, 3}, [op](GradBuilder& g, P p) { return g.op(op, {p[0]}, f64({2, 3})); }};
  c.lo = lo;
  c.hi = hi;
  return c;
}

TEST(AutodiffFiniteDifferences, Elementwise) {
  check(binary("Add", {2, 3}, {3}, {2, 3}));
  check(binary("Sub", {2, 1, 3}, {4, 1}, {2, 4, 3}));
  check(binary("Mul", {2, 3}, {2, 1}, {2, 3}));
  check(binary("Div", {3}, {2, 3}, {2, 3}));
  for (const char* op : {"Neg", "Exp", "Tanh", "Sigmoid", "Erf", "Identity"}) check(unary(op));
  check(unary("Log", 0.5, 2.0));
  check(unary("Sqrt", 0.5, 2.0));
  check(unary("Relu"));  // random points are almost surely away from the kink at 0
  // MobileNetV3's activations: each of the three pieces (kinks at -3 and 3, and where
  // alpha x + beta leaves [0, 1]).
  for (auto [lo, hi] : {std::pair{-5.0, -3.5}, std::pair{-2.5, 2.5}, std::pair{3.5, 5.0}}) {
    check(unary("HardSwish", lo, hi));
    check(unary("HardSigmoid", lo, hi));
  }
  Case pow{"Pow_const", {{2, 3}}, {2, 3}, [](GradBuilder& g, P p) {
             return g.op("Pow", {p[0], g.scalar(3.0, DType::kFloat64)}, f64({2, 3}));
           }};
  check(pow);
}

TEST(AutodiffFiniteDifferences, MatMulAndGemm) {
  check({"MatMul_2d", {{2, 3}, {3, 4}}, {2, 4}, [](GradBuilder& g, P p) {
           return g.op("MatMul", {p[0], p[1]}, f64({2, 4}));
         }});
  check({"MatMul_batched_broadcast", {{2, 2, 3}, {3, 2}}, {2, 2, 2}, [](GradBuilder& g, P p) {
           return g.op("MatMul", {p[0], p[1]}, f64({2, 2, 2}));
         }});
  check({"MatMul_vector", {{3}, {2, 3, 2}}, {2, 2}, [](GradBuilder& g, P p) {
           return g.op("MatMul", {p[0], p[1]}, f64({2, 2}));
         }});
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      const Shape a = ta ? Shape{3, 2} : Shape{2, 3};
      const Shape b = tb ? Shape{4, 3} : Shape{3, 4};
      check({"Gemm_t" + std::to_string(ta) + std::to_string(tb),
             {a, b, {4}},
             {2, 4},
             [ta, tb](GradBuilder& g, P p) {
               return g.op("Gemm", {p[0], p[1], p[2]}, f64({2, 4}),
                           attrs(ir::Attribute::make_float("alpha", 0.7f),
                                 ir::Attribute::make_float("beta", 1.3f),
                                 ir::Attribute::make_int("transA", ta),
                                 ir::Attribute::make_int("transB", tb)));
             }});
    }
  }
}

TEST(AutodiffFiniteDifferences, ShapeAndReductions) {
  check({"Reshape", {{2, 3}}, {3, 2}, [](GradBuilder& g, P p) { return g.reshape(p[0], {3, 2}); }});
  check({"Transpose", {{2, 3, 4}}, {4, 2, 3}, [](GradBuilder& g, P p) {
           return g.op("Transpose", {p[0]}, f64({4, 2, 3}),
                       attrs(ir::Attribute::make_ints("perm", {2, 0, 1})));
         }});
  check({"ReduceSum_axis", {{2, 3, 2}}, {2, 1, 2}, [](GradBuilder& g, P p) {
           return g.op("ReduceSum", {p[0], g.ints({1})}, f64({2, 1, 2}),
                       attrs(ir::Attribute::make_int("keepdims", 1)));
         }});
  check({"ReduceMean_axes", {{2, 3, 2}}, {3}, [](GradBuilder& g, P p) {
           return g.op("ReduceMean", {p[0]}, f64({3}),
                       attrs(ir::Attribute::make_ints("axes", {0, -1}),
                             ir::Attribute::make_int("keepdims", 0)));
         }});
  // A parameter read twice: its gradients are summed.
  check({"reuse", {{2, 3}}, {2, 3}, [](GradBuilder& g, P p) {
           ir::Value* sq = g.op("Mul", {p[0], p[0]}, f64({2, 3}));
           return g.op("Add", {sq, p[0]}, f64({2, 3}));
         }});
}

TEST(Autodiff, MissingRuleNamesOpAndNode) {
  Case c{"Hardmax", {{2, 3}}, {2, 3}, [](GradBuilder& g, P p) {
           return g.op("Hardmax", {p[0]}, f64({2, 3}));
         }};
  auto m = make_model(c, {{1, 2, 3, 4, 5, 6}}, {1, 1, 1, 1, 1, 1});
  try {
    passes::differentiate(*m, {.loss = "", .freeze = {"R"}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no gradient rule for operator 'Hardmax'"),
              std::string::npos)
        << e.what();
  }
}

// Round, Floor, Ceil and Sign: the refusal says why (a lost .detach() of a straight-through
// estimator would train with 0 where PyTorch's gradient is 1).
TEST(Autodiff, StepFunctionsAreRefusedWithTheReason) {
  for (const char* op : {"Round", "Floor", "Ceil", "Sign"}) {
    Case c{op, {{2, 3}}, {2, 3}, [op](GradBuilder& g, P p) {
             return g.op("Add", {p[0], g.op(op, {p[0]}, f64({2, 3}))}, f64({2, 3}));
           }};
    auto m = make_model(c, {{1, 2, 3, 4, 5, 6}}, {1, 1, 1, 1, 1, 1});
    try {
      passes::differentiate(*m, {.loss = "", .freeze = {"R"}});
      ADD_FAILURE() << op << ": expected an error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("no gradient rule for operator '" + std::string(op) + "'"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("straight-through estimator"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace ampc
