#include "tests/passes/fd_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "driver/pipeline.h"
#include "ir/verifier.h"
#include "passes/autodiff/autodiff.h"
#include "passes/expand_norm_params.h"
#include "passes/lower_resize.h"
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

// Values in [lo, hi): uniform and away from c.kinks, or a shuffled grid when c.distinct.
std::vector<double> draw(const Case& c, size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(c.lo, c.hi);
  std::vector<double> v(n);
  if (c.distinct) {
    for (size_t k = 0; k < n; ++k)
      v[k] = c.lo + (c.hi - c.lo) * (static_cast<double>(k) + 0.5) / static_cast<double>(n);
    std::shuffle(v.begin(), v.end(), rng);
    return v;
  }
  auto near_kink = [&](double x) {
    return std::any_of(c.kinks.begin(), c.kinks.end(),
                       [&](double k) { return std::fabs(x - k) < c.gap; });
  };
  for (double& x : v) {
    do x = dist(rng);
    while (near_kink(x));
  }
  return v;
}

}  // namespace

int64_t Random::uniform(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
}

double Random::real(double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng_);
}

Shape Random::shape(int64_t rank, int64_t lo, int64_t hi) {
  Shape s(static_cast<size_t>(rank));
  for (int64_t& d : s) d = uniform(lo, hi);
  return s;
}

Shape Random::broadcastable_to(const Shape& out) {
  Shape s(out.begin() + uniform(0, static_cast<int64_t>(out.size())), out.end());
  for (int64_t& d : s) d = coin() ? 1 : d;
  return s;
}

std::pair<Shape, Shape> Random::broadcast_pair(const Shape& out) {
  Shape a = out, b = out;
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t side = uniform(0, 2);  // 0: neither, 1: a, 2: b is stretched
    (side == 1 ? a : b)[i] = side == 0 ? out[i] : 1;
  }
  const bool a_shorter = coin();
  Shape& shorter = a_shorter ? a : b;
  const Shape& other = a_shorter ? b : a;
  const auto drop = static_cast<size_t>(uniform(0, static_cast<int64_t>(out.size())));
  // A leading dim can go where the other operand has the full size.
  size_t n = 0;
  while (n < drop && other[n] == out[n]) ++n;
  shorter.erase(shorter.begin(), shorter.begin() + static_cast<std::ptrdiff_t>(n));
  return {a, b};
}

ir::Value* f64_values(passes::autodiff::GradBuilder& g, const std::vector<double>& v,
                      const Shape& s) {
  ir::Value* c = g.filled(0.0, f64(s));
  std::memcpy(c->initializer->bytes.data(), v.data(), v.size() * sizeof(double));
  return c;
}

ir::Value* bool_scalar(passes::autodiff::GradBuilder& g, bool b) {
  ir::Graph& graph = g.graph();
  const std::string name = "fwd/bool_" + std::to_string(graph.initializers.size());
  ir::Value* v = graph.add_value(name, {DType::kBool, Shape{}});
  auto t = std::make_unique<ir::Tensor>();
  t->name = name;
  t->dtype = DType::kBool;
  t->bytes = {static_cast<uint8_t>(b)};
  v->initializer = std::move(t);
  graph.initializers.push_back(v);
  return v;
}

std::string str(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out.empty() ? "scalar" : out;
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
  Values values;
  for (const auto& s : c.params)
    values.push_back(draw(c, static_cast<size_t>(ir::shape_numel(s)), rng));
  std::vector<double> r(static_cast<size_t>(ir::shape_numel(c.out)));
  std::uniform_real_distribution<double> dist(c.lo, c.hi);
  for (double& v : r) v = dist(rng);

  auto m = make_model(c, values, r);
  // The compile-time lowerings the pipeline applies before differentiating (Resize,
  // LayerNormalization's broadcast scale and bias).
  passes::lower_resize(*m);
  passes::expand_norm_params(*m);
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
