// Every gradient rule against central finite differences in fp64: a small graph around the
// op, loss = ReduceSum(y * R) with fixed random weights R, the gradients computed by the
// autodiff pass and run on the CPU backend, and each compared with
// (loss(p + h) - loss(p - h)) / 2h for every element of every parameter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "compiler/ir/verifier.h"
#include "compiler/pipeline.h"
#include "passes/autodiff/autodiff.h"
#include "passes/autodiff/grad_builder.h"
#include "runtime/cpu/executor.h"

namespace ampc {
namespace {

using Shape = std::vector<int64_t>;
using Values = std::vector<std::vector<double>>;
// Builds the op under test from the parameters; returns its output.
using Build =
    std::function<ir::Value*(passes::autodiff::GradBuilder&, const std::vector<ir::Value*>&)>;

struct Case {
  std::string name;
  std::vector<Shape> params;
  Shape out;
  Build build;
  double lo = -1.5, hi = 1.5;  // parameter value range
};

ir::Tensor f64_tensor(const std::string& name, const Shape& dims, const std::vector<double>& v) {
  ir::Tensor t;
  t.name = name;
  t.dtype = DType::kFloat64;
  t.dims = dims;
  t.bytes.resize(v.size() * 8);
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

std::unique_ptr<ir::Model> make_model(const Case& c, const Values& values,
                                      const std::vector<double>& r) {
  auto m = std::make_unique<ir::Model>();
  m->opsets = {{"", 17}};
  ir::Graph& g = *m->graph;
  g.name = c.name;
  std::vector<ir::Value*> params;
  for (size_t i = 0; i < c.params.size(); ++i) {
    ir::Value* p = g.add_value("p" + std::to_string(i), {DType::kFloat64, c.params[i]});
    p->initializer = std::make_unique<ir::Tensor>(f64_tensor(p->name, c.params[i], values[i]));
    g.initializers.push_back(p);
    params.push_back(p);
  }
  passes::autodiff::GradBuilder b(g, "fwd");
  ir::Value* y = c.build(b, params);
  ir::Value* weights = g.add_value("R", {DType::kFloat64, c.out});
  weights->initializer = std::make_unique<ir::Tensor>(f64_tensor("R", c.out, r));
  g.initializers.push_back(weights);
  ir::Value* prod = b.op("Mul", {y, weights}, y->type);
  ir::Value* loss = b.op("ReduceSum", {prod}, {DType::kFloat64, Shape{}},
                         passes::autodiff::attrs(ir::Attribute::make_int("keepdims", 0)));
  g.outputs.push_back(loss);
  return m;
}

std::map<std::string, rt::Tensor> run(ir::Model& m) {
  compiler::CompileOptions options;
  rt::cpu::Executor exec(compiler::compile_model(m, options, "fd"));
  return exec.run({});
}

double loss_of(const Case& c, const Values& values, const std::vector<double>& r) {
  auto m = make_model(c, values, r);
  auto out = run(*m);
  return out.begin()->second.data<double>()[0];
}

void check(const Case& c) {
  SCOPED_TRACE(c.name);
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> dist(c.lo, c.hi);
  Values values;
  for (const auto& s : c.params) {
    values.emplace_back(static_cast<size_t>(ir::shape_numel(s)));
    for (double& v : values.back()) v = dist(rng);
  }
  std::vector<double> r(static_cast<size_t>(ir::shape_numel(c.out)));
  for (double& v : r) v = dist(rng);

  auto m = make_model(c, values, r);
  // Constants the builder made ("fwd/...") are not parameters.
  const auto grads = passes::differentiate(*m, {.loss = "", .freeze = {"R", "fwd/*"}});
  std::map<std::string, std::string> grad_name;
  for (const auto& pg : grads) {
    m->graph->outputs.push_back(pg.gradient);
    grad_name[pg.parameter->name] = pg.gradient->name;
  }
  ir::verify(*m);
  auto out = run(*m);
  const double h = 1e-6;
  for (size_t i = 0; i < c.params.size(); ++i) {
    const std::string pname = "p" + std::to_string(i);
    ASSERT_TRUE(grad_name.count(pname)) << "no gradient for " << pname;
    const rt::Tensor& gt = out.at(grad_name[pname]);
    ASSERT_EQ(gt.shape(), c.params[i]);
    for (size_t k = 0; k < values[i].size(); ++k) {
      Values plus = values, minus = values;
      plus[i][k] += h;
      minus[i][k] -= h;
      const double fd = (loss_of(c, plus, r) - loss_of(c, minus, r)) / (2 * h);
      const double got = gt.data<double>()[k];
      EXPECT_NEAR(got, fd, 1e-6 + 1e-5 * std::fabs(fd)) << pname << "[" << k << "]";
    }
  }
}

using passes::autodiff::attrs;
using passes::autodiff::GradBuilder;
using P = const std::vector<ir::Value*>&;

ir::TensorType f64(Shape s) {
  return {DType::kFloat64, std::move(s)};
}

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
  Case c{"Softsign", {{2, 3}}, {2, 3}, [](GradBuilder& g, P p) {
           return g.op("Softsign", {p[0]}, f64({2, 3}));
         }};
  auto m = make_model(c, {{1, 2, 3, 4, 5, 6}}, {1, 1, 1, 1, 1, 1});
  try {
    passes::differentiate(*m, {.loss = "", .freeze = {"R"}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no gradient rule for operator 'Softsign'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ampc
