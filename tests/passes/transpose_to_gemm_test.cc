// move_transposes_to_gemms (passes/transpose_to_gemm.h): a Transpose and a scalar op between
// it and a MatMul trade places, in both directions (MultiheadAttention's q scaling and its
// gradient); nothing moves where the transpose has other readers, the op's other operand is
// not a scalar or the op's readers are not GEMMs. The graphs run on the CPU backend against
// products written out here in double, and the CPU plan of a moved transpose has no
// Transpose step left (its MatMul reads or writes through the view); a CUDA plan is not
// rewritten.
#include "passes/transpose_to_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "ir/verifier.h"
#include "runtime/cpu/executor.h"

namespace ampc::passes {
namespace {

using Shape = std::vector<int64_t>;

// x [2, 3, 4, 5] and w [5, 6] as inputs; a scalar constant s = 0.5 as an initializer.
struct Graph {
  std::unique_ptr<ir::Model> model = std::make_unique<ir::Model>();
  ir::Graph& g = *model->graph;
  ir::Value* x = g.add_value("x", {DType::kFloat32, Shape{2, 3, 4, 5}});
  ir::Value* w = g.add_value("w", {DType::kFloat32, Shape{5, 6}});
  ir::Value* s = g.add_value("s", {DType::kFloat32, Shape{}});
  Graph() {
    model->opsets.push_back({"", 17});
    g.name = "moves";
    g.inputs = {x, w};
    s->initializer = std::make_unique<ir::Tensor>();
    s->initializer->name = "s";
    s->initializer->dtype = DType::kFloat32;
    s->initializer->bytes.resize(sizeof(float));
    ir::store_element(s->initializer->bytes.data(), 0, 0.5f);
    g.initializers.push_back(s);
  }
  ir::Value* value(const std::string& name, Shape shape) {
    return g.add_value(name, {DType::kFloat32, std::move(shape)});
  }
  ir::Node* node(const std::string& op, std::vector<ir::Value*> in, ir::Value* out) {
    return g.add_node(op, std::move(in), {out}, op + "_" + out->name);
  }
  // Transpose of `in` swapping axes 1 and 2.
  ir::Node* swap12(ir::Value* in, const std::string& out) {
    const Shape& s_in = *in->type.shape;
    ir::Node* t = node("Transpose", {in}, value(out, {s_in[0], s_in[2], s_in[1], s_in[3]}));
    t->attributes.push_back(ir::Attribute::make_ints("perm", {0, 2, 1, 3}));
    return t;
  }
};

rt::Tensor counting(const Shape& shape, float scale) {
  rt::Tensor t(DType::kFloat32, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = scale * static_cast<float>(i % 7 - 3);
  return t;
}

compiler::CompileOptions options(const char* target) {
  compiler::CompileOptions o;
  o.lowering.target = target;
  return o;
}

int transpose_steps(const plan::Plan& p) {
  int n = 0;
  for (const auto& s : p.steps()) n += s.op() == "Transpose";
  return n;
}

std::map<std::string, rt::Tensor> run(const plan::Plan& p) {
  rt::cpu::Executor exec(p);
  return exec.run({{"x", counting({2, 3, 4, 5}, 1.0f)}, {"w", counting({5, 6}, 0.25f)}});
}

const ir::Node* producer(const ir::Model& m, const std::string& value) {
  const ir::Value* v = m.graph->find_value(value);
  return v ? v->producer : nullptr;
}

// Transpose(x) -> Div(., s) -> MatMul(., w): the Div moves before the transpose.
struct ScaledOperand : Graph {
  ir::Node* t = swap12(x, "xt");  // [2, 4, 3, 5]
  ir::Node* div = node("Div", {t->outputs[0], s}, value("q", {2, 4, 3, 5}));
  ir::Node* mm = node("MatMul", {div->outputs[0], w}, value("y", {2, 4, 3, 6}));
  ScaledOperand() { g.outputs = {mm->outputs[0]}; }
};

// Every element y[b, i, j, n] of a [2, 4, 3, 6] result against want(d), d the float64 product
// sum_k x[b, j, i, k] w[k, n] of the transposed x (x and w as counting() makes them).
template <typename Want>
void expect_transposed_product(const rt::Tensor& y, Want want) {
  const rt::Tensor x = counting({2, 3, 4, 5}, 1.0f), w = counting({5, 6}, 0.25f);
  ASSERT_EQ(y.shape(), (Shape{2, 4, 3, 6}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t n = 0; n < 6; ++n) {
          double dot = 0;
          for (int64_t k = 0; k < 5; ++k)
            dot += static_cast<double>(x.data<float>()[((b * 3 + j) * 4 + i) * 5 + k]) *
                   w.data<float>()[k * 6 + n];
          ASSERT_EQ(y.data<float>()[((b * 4 + i) * 3 + j) * 6 + n], want(dot)) << b << i << j << n;
        }
}

// MatMul(Transpose(x) / 0.5, w): every term doubled exactly, so the sum is 2 d.
void expect_scaled_operand_product(const rt::Tensor& y) {
  expect_transposed_product(y, [](double d) { return static_cast<float>(d / 0.5); });
}

TEST(TransposeToGemm, AScaledOperandsTransposeMovesToItsMatMul) {
  ScaledOperand c;
  EXPECT_EQ(move_transposes_to_gemms(*c.model), 1);
  EXPECT_EQ(c.div->inputs[0], c.x);
  EXPECT_EQ(*c.div->outputs[0]->type.shape, (Shape{2, 3, 4, 5}));
  EXPECT_EQ(c.t->inputs[0], c.div->outputs[0]);
  EXPECT_EQ(c.mm->inputs[0], c.t->outputs[0]);
  EXPECT_EQ(*c.mm->inputs[0]->type.shape, (Shape{2, 4, 3, 5}));
  ir::verify(*c.model);
}

TEST(TransposeToGemm, CpuPlansFoldTheMovedTransposeAndComputeTheSameProduct) {
  ScaledOperand cpu, cuda;
  const plan::Plan p = compiler::compile_model(*cpu.model, options("cpu"), "moves");
  EXPECT_EQ(transpose_steps(p), 0);
  expect_scaled_operand_product(run(p).at("y"));
  const plan::Plan q = compiler::compile_model(*cuda.model, options("cuda:sm_90"), "moves");
  EXPECT_EQ(transpose_steps(q), 1);  // not rewritten: a copy either way there
  expect_scaled_operand_product(run(q).at("y"));
}

// MatMul(a, w) -> Mul(., s) -> Transpose -> Relu: the transpose moves before the Mul, where
// the MatMul writes through it.
TEST(TransposeToGemm, AScaledProductsTransposeMovesToItsMatMul) {
  Graph c;
  ir::Node* mm = c.node("MatMul", {c.x, c.w}, c.value("p", {2, 3, 4, 6}));
  ir::Node* mul = c.node("Mul", {c.s, mm->outputs[0]}, c.value("ps", {2, 3, 4, 6}));
  ir::Node* t = c.swap12(mul->outputs[0], "pt");
  ir::Node* relu = c.node("Relu", {t->outputs[0]}, c.value("y", {2, 4, 3, 6}));
  c.g.outputs = {relu->outputs[0]};
  EXPECT_EQ(move_transposes_to_gemms(*c.model), 1);
  EXPECT_EQ(t->inputs[0], mm->outputs[0]);
  EXPECT_EQ(mul->inputs[1], t->outputs[0]);
  EXPECT_EQ(relu->inputs[0], mul->outputs[0]);
  ir::verify(*c.model);

  const plan::Plan p = compiler::compile_model(*c.model, options("cpu"), "moves");
  EXPECT_EQ(transpose_steps(p), 0);
  // Relu(0.5 * the product rounded to float).
  expect_transposed_product(run(p).at("y"),
                            [](double d) { return std::max(0.5f * static_cast<float>(d), 0.0f); });
}

// Nothing moves: the transpose has a second reader; the op's other operand is a vector (it
// would have to be permuted too); the op's reader is not a GEMM.
TEST(TransposeToGemm, StaysWhereMovingGainsNothingOrIsNotExact) {
  {
    ScaledOperand c;
    c.node("Neg", {c.t->outputs[0]}, c.value("n", {2, 4, 3, 5}));
    c.g.outputs.push_back(c.g.find_value("n"));
    EXPECT_EQ(move_transposes_to_gemms(*c.model), 0);
  }
  {
    Graph c;
    ir::Node* t = c.swap12(c.x, "xt");
    ir::Value* v = c.value("v", {3, 1});  // along xt's axis 2, x's axis 1
    c.g.inputs.push_back(v);
    ir::Node* mul = c.node("Mul", {t->outputs[0], v}, c.value("q", {2, 4, 3, 5}));
    c.node("MatMul", {mul->outputs[0], c.w}, c.value("y", {2, 4, 3, 6}));
    c.g.outputs = {c.g.find_value("y")};
    EXPECT_EQ(move_transposes_to_gemms(*c.model), 0);
  }
  {
    Graph c;
    ir::Node* t = c.swap12(c.x, "xt");
    ir::Node* div = c.node("Div", {t->outputs[0], c.s}, c.value("q", {2, 4, 3, 5}));
    c.node("Relu", {div->outputs[0]}, c.value("y", {2, 4, 3, 5}));
    c.g.outputs = {c.g.find_value("y")};
    EXPECT_EQ(move_transposes_to_gemms(*c.model), 0);
    EXPECT_EQ(producer(*c.model, "q"), div);
  }
}

}  // namespace
}  // namespace ampc::passes
