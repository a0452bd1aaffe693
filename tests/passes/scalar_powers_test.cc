// expand_scalar_powers (passes/scalar_powers.h): Pow by a constant 1, 2, 3, -1, -2, 0.5 or
// -0.5 (float or integer constant) becomes PyTorch's products, reciprocals and square roots;
// other exponents, run-time ones (a graph input, training state), 16-bit bases and a Pow whose
// exponent broadcasts its output stay Pows. The compiled graph (a fused kernel on the CPU)
// gives PyTorch's special cases: sqrt's -0 and NaN of -inf, (x * x) * x rounded twice. The bits
// against PyTorch itself: tests/oracle/pow_scalar_oracle.py.
#include "passes/scalar_powers.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "ir/tensor.h"
#include "runtime/cpu/executor.h"

namespace ampc::passes {
namespace {

constexpr int64_t kN = 8;

struct Powers {
  std::unique_ptr<ir::Model> model = std::make_unique<ir::Model>();
  ir::Value* x = nullptr;
  explicit Powers(DType t = DType::kFloat32) {
    model->opsets.push_back({"", 17});
    model->graph->name = "powers";
    x = model->graph->add_value("x", {t, std::vector<int64_t>{kN}});
    model->graph->inputs = {x};
  }
  ir::Value* constant(const std::string& name, ir::Tensor t) {
    t.name = name;
    ir::Value* v = model->graph->add_value(name, {t.dtype, t.dims});
    v->initializer = std::make_unique<ir::Tensor>(std::move(t));
    model->graph->initializers.push_back(v);
    return v;
  }
  // y = Pow(x, p): the exponent an initializer of `dims` (a scalar by default).
  ir::Value* pow(const std::string& out, ir::Value* p) {
    ir::Value* y = model->graph->add_value(out, x->type);
    model->graph->add_node("Pow", {x, p}, {y}, "pow_" + out);
    model->graph->outputs.push_back(y);
    return y;
  }
};

template <typename T>
ir::Tensor tensor(DType t, std::vector<int64_t> dims, const std::vector<T>& values) {
  ir::Tensor r;
  r.dtype = t;
  r.dims = std::move(dims);
  r.bytes.resize(values.size() * sizeof(T));
  std::memcpy(r.bytes.data(), values.data(), r.bytes.size());
  return r;
}

ir::Tensor f32(float v, std::vector<int64_t> dims = {}) {
  return tensor<float>(DType::kFloat32, std::move(dims), {v});
}

int count(const ir::Model& m, const std::string& op) {
  int k = 0;
  for (const auto& n : m.graph->nodes) k += n->op_type == op;
  return k;
}

const ir::Node* producer(const ir::Model& m, const std::string& value) {
  for (const auto& n : m.graph->nodes) {
    for (const ir::Value* o : n->outputs) {
      if (o && o->name == value) return n.get();
    }
  }
  return nullptr;
}

TEST(ScalarPowers, SpecialExponentsBecomeTheirOps) {
  Powers g;
  const std::map<std::string, std::string> last_op = {
      {"p1", "Identity"}, {"p2", "Mul"},  {"p3", "Mul"}, {"pm1", "Div"},
      {"pm2", "Div"},     {"ph", "Sqrt"}, {"pmh", "Div"}};
  const std::map<std::string, float> exponent = {
      {"p1", 1}, {"p2", 2}, {"p3", 3}, {"pm1", -1}, {"pm2", -2}, {"ph", 0.5f}, {"pmh", -0.5f}};
  for (const auto& [name, p] : exponent) g.pow(name, g.constant(name + "_e", f32(p)));
  EXPECT_EQ(expand_scalar_powers(*g.model), 7);
  EXPECT_EQ(count(*g.model, "Pow"), 0);
  for (const auto& [name, op] : last_op) {
    const ir::Node* n = producer(*g.model, name);
    ASSERT_NE(n, nullptr) << name;
    EXPECT_EQ(n->op_type, op) << name;
  }
  // x^3 = (x * x) * x, x^-2 = 1 / (x * x), x^-0.5 = 1 / sqrt(x).
  const ir::Node* cube = producer(*g.model, "p3");
  EXPECT_EQ(cube->inputs[1], g.x);
  EXPECT_EQ(cube->inputs[0]->producer->op_type, "Mul");
  EXPECT_EQ(producer(*g.model, "pm2")->inputs[1]->producer->op_type, "Mul");
  EXPECT_EQ(producer(*g.model, "pmh")->inputs[1]->producer->op_type, "Sqrt");
  EXPECT_EQ(count(*g.model, "Sqrt"), 2);
}

TEST(ScalarPowers, IntegerAndDoubleExponentsAndDoubleBases) {
  Powers g(DType::kFloat64);
  g.pow("i2", g.constant("i2_e", tensor<int64_t>(DType::kInt64, {}, {2})));
  g.pow("d3", g.constant("d3_e", tensor<double>(DType::kFloat64, {}, {3.0})));
  EXPECT_EQ(expand_scalar_powers(*g.model), 2);
  EXPECT_EQ(count(*g.model, "Pow"), 0);
}

TEST(ScalarPowers, OtherPowsStay) {
  Powers g;
  g.pow("other", g.constant("other_e", f32(2.5f)));
  g.pow("zero", g.constant("zero_e", f32(0.0f)));
  g.pow("vector", g.constant("vector_e", tensor<float>(DType::kFloat32, {2}, {2.0f, 2.0f})));
  ir::Value* runtime = g.model->graph->add_value("e", {DType::kFloat32, std::vector<int64_t>{}});
  g.model->graph->inputs.push_back(runtime);
  g.pow("runtime", runtime);
  // An exponent of shape [1] on a scalar base broadcasts the output to [1]: not x's type.
  ir::Value* s = g.model->graph->add_value("s", {DType::kFloat32, std::vector<int64_t>{}});
  g.model->graph->inputs.push_back(s);
  ir::Value* sy = g.model->graph->add_value("sy", {DType::kFloat32, std::vector<int64_t>{1}});
  g.model->graph->add_node("Pow", {s, g.constant("sy_e", f32(2.0f, {1}))}, {sy}, "pow_sy");
  // Initializers whose data changes: training state, and one that is also a graph input.
  ir::Value* state = g.constant("state_e", f32(2.0f));
  g.model->state_updates.push_back({state, state});
  g.pow("state", state);
  ir::Value* fed = g.constant("fed_e", f32(2.0f));
  g.model->graph->inputs.push_back(fed);
  g.pow("fed", fed);
  EXPECT_EQ(expand_scalar_powers(*g.model), 0);
  EXPECT_EQ(count(*g.model, "Pow"), 7);

  Powers half(DType::kFloat16);
  half.pow("h2", half.constant("h2_e", f32(2.0f)));
  EXPECT_EQ(expand_scalar_powers(*half.model), 0);
}

// The compiled plan (the pipeline runs the pass; the CPU backend fuses the ops) on special
// values: PyTorch's results, which a correctly rounded pow does not give for every one.
TEST(ScalarPowers, CompiledPlanComputesPyTorchsSpecialCases) {
  Powers g;
  for (const auto& [name, p] :
       std::map<std::string, float>{{"p3", 3}, {"ph", 0.5f}, {"pmh", -0.5f}, {"pm2", -2}})
    g.pow(name, g.constant(name + "_e", f32(p)));
  compiler::CompileOptions o;
  o.lowering.target = "cpu";
  rt::cpu::Executor exec(compiler::compile_model(*g.model, o, "powers"));
  const float inf = std::numeric_limits<float>::infinity();
  // 0x1.00093ep+0: (x * x) * x, rounded twice, is not the correctly rounded cube (powf's).
  const std::vector<float> xs = {-0.0f, -inf, 0.0f, inf, 4.0f, 0x1.00093ep+0f, 1.3f, 2.7f};
  rt::Tensor x(DType::kFloat32, {kN});
  for (int64_t i = 0; i < kN; ++i) x.data<float>()[i] = xs[static_cast<size_t>(i)];
  auto out = exec.run({{"x", x}});
  int cube_differs_from_powf = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float v = xs[i];
    const float cube = out.at("p3").data<float>()[i];
    EXPECT_EQ(std::bit_cast<uint32_t>(cube), std::bit_cast<uint32_t>((v * v) * v)) << v;
    cube_differs_from_powf += std::isfinite(v) && cube != std::pow(v, 3.0f);
    const float root = out.at("ph").data<float>()[i];
    const float want_root = std::sqrt(v);
    EXPECT_TRUE(std::bit_cast<uint32_t>(root) == std::bit_cast<uint32_t>(want_root) ||
                (std::isnan(root) && std::isnan(want_root)))
        << v;
    const float rroot = out.at("pmh").data<float>()[i];
    const float want_rroot = 1.0f / std::sqrt(v);
    EXPECT_TRUE(std::bit_cast<uint32_t>(rroot) == std::bit_cast<uint32_t>(want_rroot) ||
                (std::isnan(rroot) && std::isnan(want_rroot)))
        << v;
    EXPECT_EQ(out.at("pm2").data<float>()[i], 1.0f / (v * v)) << v;
  }
  // sqrt(-0) = -0 (pow: +0), 1 / sqrt(-0) = -inf (pow: +inf), sqrt(-inf) = NaN (pow: +inf).
  EXPECT_TRUE(std::signbit(out.at("ph").data<float>()[0]));
  EXPECT_EQ(out.at("pmh").data<float>()[0], -inf);
  EXPECT_TRUE(std::isnan(out.at("ph").data<float>()[1]));
  EXPECT_GE(cube_differs_from_powf, 1);
}

}  // namespace
}  // namespace ampc::passes
