// stack_summed_matmuls (passes/summed_matmuls.h): a tree of Adds over MatMul(Transpose(P_i),
// B_i) (or Gemm(P_i, B_i) with transA) becomes one MatMul of the stacked operands, in float32
// and float64, and the compiled plan computes the sum (against the products summed in double
// here). 16-bit sums where one lowered recurrent layer's gradient wrote every term, the plan's
// result the exact sum rounded once. Left as they are: a term also read elsewhere, other
// 16-bit sums, products without the transpose, and stacks larger than the partial sums. An
// unrolled LSTM's weight gradients against PyTorch: tests/oracle (TorchRnnOracle).
#include "passes/summed_matmuls.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/half.h"
#include "driver/pipeline.h"
#include "passes/autodiff/autodiff.h"
#include "runtime/cpu/executor.h"

namespace ampc::passes {
namespace {

// How a term is written: MatMul(Transpose(P), B), MatMul(A, B) without a transpose, Gemm(P, B)
// with transA (a Linear layer's weight gradient), Gemm(A, B) without it.
enum class Form { kTransposedMatMul, kMatMul, kGemmTransA, kGemm };

// y = sum_i P_i^T B_i, the P_i [k, m] and B_i [k, n] graph inputs, added in a chain; every
// node's name starts with `node_prefix`.
struct Sum {
  std::unique_ptr<ir::Model> model = std::make_unique<ir::Model>();
  std::vector<ir::Value*> terms;

  Sum(int terms_count, int64_t k, int64_t m, int64_t n, DType t = DType::kFloat32,
      Form form = Form::kTransposedMatMul, const std::string& node_prefix = "") {
    const bool transposed = form != Form::kMatMul && form != Form::kGemm;
    model->opsets.push_back({"", 17});
    model->graph->name = "sum";
    ir::Graph& g = *model->graph;
    for (int i = 0; i < terms_count; ++i) {
      const std::string s = std::to_string(i);
      ir::Value* p = input("p" + s, t, transposed ? k : m, transposed ? m : k);
      ir::Value* b = input("b" + s, t, k, n);
      ir::Value* y = g.add_value("term" + s, {t, std::vector<int64_t>{m, n}});
      if (form == Form::kGemmTransA || form == Form::kGemm) {
        ir::Node* gemm = g.add_node("Gemm", {p, b}, {y}, node_prefix + "gemm" + s);
        gemm->attributes.push_back(ir::Attribute::make_float("alpha", 1.0f));
        gemm->attributes.push_back(ir::Attribute::make_int("transA", transposed ? 1 : 0));
        gemm->attributes.push_back(ir::Attribute::make_int("transB", 0));
      } else {
        ir::Value* a = p;
        if (transposed) {
          a = g.add_value("pt" + s, {t, std::vector<int64_t>{m, k}});
          g.add_node("Transpose", {p}, {a}, node_prefix + "transpose" + s)
              ->attributes.push_back(ir::Attribute::make_ints("perm", {1, 0}));
        }
        g.add_node("MatMul", {a, b}, {y}, node_prefix + "matmul" + s);
      }
      terms.push_back(y);
    }
    ir::Value* acc = terms[0];
    for (int i = 1; i < terms_count; ++i) {
      ir::Value* y = g.add_value("sum" + std::to_string(i), {t, std::vector<int64_t>{m, n}});
      g.add_node("Add", {acc, terms[static_cast<size_t>(i)]}, {y},
                 node_prefix + "add" + std::to_string(i));
      acc = y;
    }
    g.outputs.push_back(acc);
  }

  ir::Value* input(const std::string& name, DType t, int64_t rows, int64_t cols) {
    ir::Value* v = model->graph->add_value(name, {t, std::vector<int64_t>{rows, cols}});
    v->is_graph_input = true;
    model->graph->inputs.push_back(v);
    return v;
  }

  const ir::Node* output_producer() const { return model->graph->outputs[0]->producer; }
};

// The name prefix of a lowered LSTM's nodes (passes/recurrent_lowering.cc) and of their
// gradients' (autodiff).
const std::string kLstmNodes = "rnn/LSTM/lowered/";
const std::string kLstmGrad = gradient_name_prefix(kLstmNodes);

const ir::Node* producer(const ir::Value* v) {
  return v ? v->producer : nullptr;
}

TEST(StackSummedMatmuls, ATreeOfTransposedProductsBecomesOneProduct) {
  Sum s(4, 2, 5, 7);  // stacked 8 x (5 + 7) = 96 elements, partial sums 4 x 35
  EXPECT_EQ(stack_summed_matmuls(*s.model), 1);
  const ir::Node* mm = s.output_producer();
  ASSERT_TRUE(mm);
  EXPECT_EQ(mm->op_type, "MatMul");
  const ir::Node* t = producer(mm->inputs[0]);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->op_type, "Transpose");
  const ir::Node* pc = producer(t->inputs[0]);
  const ir::Node* bc = producer(mm->inputs[1]);
  ASSERT_TRUE(pc && bc);
  EXPECT_EQ(pc->op_type, "Concat");
  EXPECT_EQ(bc->op_type, "Concat");
  ASSERT_EQ(pc->inputs.size(), 4u);
  ASSERT_EQ(bc->inputs.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {  // term i's operands side by side
    EXPECT_EQ(pc->inputs[i]->name, "p" + std::to_string(i));
    EXPECT_EQ(bc->inputs[i]->name, "b" + std::to_string(i));
  }
  EXPECT_EQ(*pc->outputs[0]->type.shape, (std::vector<int64_t>{8, 5}));
  EXPECT_EQ(*mm->outputs[0]->type.shape, (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(mm->outputs[0]->name, "sum3");  // readers keep naming the sum
}

TEST(StackSummedMatmuls, LeavesOtherSumsAlone) {
  {  // a term that is also a graph output
    Sum s(3, 2, 4, 4);
    s.model->graph->outputs.push_back(s.terms[1]);
    EXPECT_EQ(stack_summed_matmuls(*s.model), 0);
  }
  {  // 16-bit terms: their per-op roundings are the autocast semantics
    Sum s(3, 2, 4, 4, DType::kBFloat16);
    EXPECT_EQ(stack_summed_matmuls(*s.model), 0);
  }
  {  // 16-bit terms of a recurrent layer's gradient and of another node's
    Sum s(3, 2, 4, 4, DType::kFloat16, Form::kTransposedMatMul, kLstmGrad);
    s.model->recurrent_lowerings.push_back({kLstmNodes, "LSTM"});
    s.terms[2]->producer->name = "grad/linear/" + s.terms[2]->producer->name;
    EXPECT_EQ(stack_summed_matmuls(*s.model), 0);
  }
  {  // 16-bit terms named as a recurrent layer's gradient, of a model that lowered none
    Sum s(3, 2, 4, 4, DType::kFloat16, Form::kTransposedMatMul, kLstmGrad);
    EXPECT_EQ(stack_summed_matmuls(*s.model), 0);
  }
  {  // products without the transpose, as MatMul and as Gemm (A [m, k] B: as p^T b their shapes
     // would line up only where k = m, which the size test refuses in any case)
    Sum s(3, 2, 4, 4, DType::kFloat32, Form::kMatMul);
    EXPECT_EQ(stack_summed_matmuls(*s.model), 0);
    Sum s2(3, 2, 4, 4, DType::kFloat32, Form::kGemm);
    EXPECT_EQ(stack_summed_matmuls(*s2.model), 0);
  }
  {  // stacked operands (2 * 100 * 4 elements) larger than the partial sums (2 * 2 * 2)
    Sum s(2, 100, 2, 2);
    EXPECT_EQ(stack_summed_matmuls(*s.model), 0);
  }
  {  // a single product: nothing to add
    Sum s(1, 2, 4, 4);
    EXPECT_EQ(stack_summed_matmuls(*s.model), 0);
  }
}

// The compiled CPU plan (the pass runs in every pipeline) against the sum of the products
// computed in double here.
template <typename T>
void check_plan_sum(DType t, double tolerance, Form form = Form::kTransposedMatMul) {
  constexpr int kTerms = 5;
  constexpr int64_t kK = 3, kM = 6, kN = 9;
  Sum s(kTerms, kK, kM, kN, t, form);
  EXPECT_EQ(stack_summed_matmuls(*Sum(kTerms, kK, kM, kN, t, form).model), 1);  // the plan's
  compiler::CompileOptions o;
  o.lowering.target = "cpu";
  rt::cpu::Executor exec(compiler::compile_model(*s.model, o, "sum"));
  std::map<std::string, rt::Tensor> feeds;
  std::vector<double> want(kM * kN, 0.0);
  for (int i = 0; i < kTerms; ++i) {
    rt::Tensor p(t, {kK, kM}), b(t, {kK, kN});
    for (int64_t j = 0; j < p.numel(); ++j) p.data<T>()[j] = T(std::sin(1.0 + i * 31 + j));
    for (int64_t j = 0; j < b.numel(); ++j) b.data<T>()[j] = T(std::cos(2.0 + i * 17 + j));
    for (int64_t r = 0; r < kM; ++r) {
      for (int64_t c = 0; c < kN; ++c) {
        for (int64_t q = 0; q < kK; ++q) {
          want[r * kN + c] += double(p.data<T>()[q * kM + r]) * double(b.data<T>()[q * kN + c]);
        }
      }
    }
    feeds["p" + std::to_string(i)] = p;
    feeds["b" + std::to_string(i)] = b;
  }
  auto out = exec.run(feeds);
  const rt::Tensor& y = out.at("sum" + std::to_string(kTerms - 1));
  ASSERT_EQ(y.numel(), kM * kN);
  for (int64_t j = 0; j < y.numel(); ++j) {
    EXPECT_NEAR(double(y.data<T>()[j]), want[j], tolerance) << j;
  }
}

TEST(StackSummedMatmuls, CompiledPlanComputesTheSum) {
  check_plan_sum<float>(DType::kFloat32, 1e-5);
  check_plan_sum<double>(DType::kFloat64, 1e-12);
}

// Gemm(P_i, B_i) with transA: a Linear layer's weight gradient, of a cell stepped in a loop.
TEST(StackSummedMatmuls, GemmTermsWithTransAAreStackedToo) {
  Sum s(3, 2, 5, 7, DType::kFloat32, Form::kGemmTransA);
  EXPECT_EQ(stack_summed_matmuls(*s.model), 1);
  const ir::Node* mm = s.output_producer();
  ASSERT_TRUE(mm);
  EXPECT_EQ(mm->op_type, "MatMul");
  check_plan_sum<float>(DType::kFloat32, 1e-5, Form::kGemmTransA);
}

// A 16-bit sum over the time steps of one recurrent layer's gradient is one product: the
// compiled plan's result is the exact sum rounded once to fp16 (PyTorch's RNN call), where
// adding the rounded products one by one, autocast's order elsewhere, is several fp16 ulps off.
TEST(StackSummedMatmuls, SixteenBitSumOfOneRecurrentLayerIsRoundedOnce) {
  constexpr int kTerms = 16;
  constexpr int64_t kK = 3, kM = 6, kN = 9;
  auto lstm_sum = [] {
    Sum s(kTerms, kK, kM, kN, DType::kFloat16, Form::kTransposedMatMul, kLstmGrad);
    s.model->recurrent_lowerings.push_back({kLstmNodes, "LSTM"});
    return s;
  };
  Sum rewritten = lstm_sum();
  EXPECT_EQ(stack_summed_matmuls(*rewritten.model), 1);
  ASSERT_TRUE(rewritten.output_producer());
  EXPECT_EQ(rewritten.output_producer()->op_type, "MatMul");
  EXPECT_TRUE(rewritten.output_producer()->name.starts_with(kLstmGrad));

  Sum s = lstm_sum();
  compiler::CompileOptions o;
  o.lowering.target = "cpu";
  rt::cpu::Executor exec(compiler::compile_model(*s.model, o, "sum"));
  std::map<std::string, rt::Tensor> feeds;
  std::vector<double> exact(kM * kN, 0.0);
  std::vector<float> stepwise(kM * kN, 0.0f);  // each product and partial sum rounded to fp16
  auto to_half = [](double x) { return half_to_float(float_to_half(static_cast<float>(x))); };
  for (int i = 0; i < kTerms; ++i) {
    rt::Tensor p(DType::kFloat16, {kK, kM}), b(DType::kFloat16, {kK, kN});
    for (int64_t j = 0; j < p.numel(); ++j)
      p.data<Half>()[j] = float_to_half(static_cast<float>(1.5 + std::sin(1.0 + i * 31 + j)));
    for (int64_t j = 0; j < b.numel(); ++j)
      b.data<Half>()[j] = float_to_half(static_cast<float>(1.25 + std::cos(2.0 + i * 17 + j)));
    for (int64_t r = 0; r < kM; ++r) {
      for (int64_t c = 0; c < kN; ++c) {
        double product = 0.0;
        for (int64_t q = 0; q < kK; ++q) {
          product += double(half_to_float(p.data<Half>()[q * kM + r])) *
                     double(half_to_float(b.data<Half>()[q * kN + c]));
        }
        exact[r * kN + c] += product;
        stepwise[r * kN + c] = to_half(double(stepwise[r * kN + c]) + to_half(product));
      }
    }
    feeds["p" + std::to_string(i)] = p;
    feeds["b" + std::to_string(i)] = b;
  }
  auto out = exec.run(feeds);
  const rt::Tensor& y = out.at("sum" + std::to_string(kTerms - 1));
  ASSERT_EQ(y.numel(), kM * kN);
  // One rounding: half an fp16 ulp of the result (2^-11 relative at most), and fp32's
  // accumulation error over 48 products (far below it).
  double stepwise_worst = 0.0;
  for (int64_t j = 0; j < y.numel(); ++j) {
    const double bound = std::abs(exact[j]) * (std::ldexp(1.0, -11) + 48 * std::ldexp(1.0, -24));
    EXPECT_LE(std::abs(double(half_to_float(y.data<Half>()[j])) - exact[j]), bound) << j;
    stepwise_worst = std::max(stepwise_worst, std::abs(stepwise[j] - exact[j]) / bound);
  }
  EXPECT_GT(stepwise_worst, 2.0);  // the test tells the two orders apart
}

}  // namespace
}  // namespace ampc::passes
