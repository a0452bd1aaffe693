#include "tests/passes/fd_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "compiler/ir/verifier.h"
#include "compiler/pipeline.h"
#include "passes/autodiff/autodiff.h"
#include "runtime/cpu/executor.h"

namespace ampc::fd {
namespace {

ir::Tensor f64_tensor(const std::string& name, const Shape& dims, const std::vector<double>& v) {
  ir::Tensor t;
  t.name = name;
  t.dtype = DType::kFloat64;
  t.dims = dims;
  t.bytes.resize(v.size() * 8);
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

}  // namespace

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
    p->from_model = true;
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

namespace {

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

}  // namespace

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


}  // namespace ampc::fd
