// GEMM steps with folded work (runtime/cpu/library_step.h): operand transposes and the BIAS,
// RELU, RELU_BIAS and BGRADB epilogues, against a float64 reference computed here, and against the
// unfolded operators bit for bit (fp16 included; bf16 rounds the fp32 result once).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/half.h"
#include "kernels/cpu/dnnl_matmul.h"
#include "lower/legalize.h"
#include "runtime/cpu/library_step.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::rt::cpu {
namespace {

using namespace optest;

// What the compiler folded into the call: the epilogue and the operands' transposes.
struct Fold {
  plan::GemmParams::Epilogue epilogue = plan::GemmParams::NONE;
  bool trans_a = false, trans_b = false;
  std::vector<int64_t> perm_a = {}, perm_b = {}, perm_y = {};  // strided views
};

// A plan with the folded step and its input buffers (their shapes give the operands' ranks).
plan::Plan folded_plan(const std::string& op, const Fold& fold, const std::vector<Tensor>& inputs,
                       int num_outputs, const std::vector<plan::Attribute>& attrs) {
  plan::Plan p;
  plan::Step& step = *p.add_steps();
  step.set_op(op);
  step.set_opset_version(17);
  step.add_source_nodes("gemm");
  for (auto& a : attrs) *step.add_attributes() = a;
  std::vector<const Tensor*> ins;
  for (const auto& t : inputs) {
    plan::Buffer& b = *p.add_buffers();
    b.set_id(p.buffers_size() - 1);
    b.set_dtype(static_cast<int32_t>(t.dtype()));
    b.set_shape_known(true);
    for (int64_t d : t.shape()) b.add_shape(d);
    step.add_inputs(b.id());
    ins.push_back(&t);
  }
  for (int o = 0; o < num_outputs; ++o) {
    plan::Buffer& b = *p.add_buffers();
    b.set_id(p.buffers_size() - 1);
    step.add_outputs(b.id());
  }
  // As plan emission writes it: the node legalized, then the fold on top of its parameters.
  lower::legalize_for_tensors(step, ins, num_outputs);
  plan::GemmParams& g = *step.mutable_gemm();
  g.set_trans_a(g.trans_a() != fold.trans_a);
  g.set_trans_b(g.trans_b() != fold.trans_b);
  g.set_epilogue(fold.epilogue);
  g.mutable_perm_a()->Assign(fold.perm_a.begin(), fold.perm_a.end());
  g.mutable_perm_b()->Assign(fold.perm_b.begin(), fold.perm_b.end());
  g.mutable_perm_y()->Assign(fold.perm_y.begin(), fold.perm_y.end());
  return p;
}

std::vector<Tensor> run_folded(const std::string& op, Fold fold, const std::vector<Tensor>& inputs,
                               int num_outputs, std::vector<plan::Attribute> attrs = {}) {
  const plan::Plan p = folded_plan(op, fold, inputs, num_outputs, attrs);
  const plan::Step& step = p.steps(0);
  std::vector<const Tensor*> ins;
  for (const auto& t : inputs) ins.push_back(&t);
  std::vector<Tensor> outs(static_cast<size_t>(num_outputs));
  std::vector<Tensor*> out_ptrs;
  for (auto& t : outs) out_ptrs.push_back(&t);
  EXPECT_TRUE(has_folded_work(step));
  const FoldedGemm gemm(*OpRegistry::instance().find(op, ""), step, p);
  gemm.run(ins, out_ptrs);
  return outs;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.numel() * dtype_size(a.dtype())) == 0;
}

TEST(LibraryStep, TransposedOperandsBiasAndReluMatchFloat64) {
  // Y = relu(X^T W + b) with X given as [K, M] and its transpose folded.
  const int64_t m = 3, k = 4, n = 5;
  const auto xv = pseudo_random(k * m, 1), wv = pseudo_random(k * n, 2), bv = pseudo_random(n, 3);
  const Tensor x = make(DType::kFloat32, {k, m}, xv);
  const Tensor w = make(DType::kFloat32, {k, n}, wv);
  const Tensor b = make(DType::kFloat32, {n}, bv);
  const auto y = run_folded("MatMul", {plan::GemmParams::RELU_BIAS, true, false}, {x, w, b}, 1);
  std::vector<double> want(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = bv[j];
      for (int64_t p = 0; p < k; ++p) s += xv[p * m + i] * wv[p * n + j];
      want[i * n + j] = std::max(0.0, s);
    }
  }
  ASSERT_EQ(y[0].shape(), (std::vector<int64_t>{m, n}));
  expect_close(values(y[0]), want, 1e-5);
}

// f32 and fp16: the unfolded operators' result, bit for bit (f32 through oneDNN, whose bias
// and ReLU follow the fp32 product; fp16 through the operators themselves).
TEST(LibraryStep, EpiloguesEqualTheUnfoldedOperatorsBitForBit) {
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    SCOPED_TRACE(dtype_name(t));
    const Tensor x = make(t, {2, 6, 4}, pseudo_random(48, 4));
    const Tensor wt = make(t, {5, 4}, pseudo_random(20, 5));  // W^T, its transpose folded
    const Tensor b = make(t, {5}, pseudo_random(5, 6));
    const auto folded =
        run_folded("MatMul", {plan::GemmParams::RELU_BIAS, false, true}, {x, wt, b}, 1);
    const Tensor w = run("Transpose", {wt}, {attr_ints("perm", {1, 0})}, 1, 17)[0];
    const Tensor mm = run("MatMul", {x, w}, {}, 1, 17)[0];
    const Tensor biased = run("Add", {mm, b}, {}, 1, 17)[0];
    const Tensor want = run("Relu", {biased}, {}, 1, 17)[0];
    EXPECT_TRUE(same_bits(folded[0], want));
  }
}

// bf16 through oneDNN (on a CPU with bf16 arithmetic): the epilogue is applied to the fp32
// accumulator and the output rounded once, as cuBLASLt does on the GPU: the f32 result on the
// bf16 values, rounded to bf16 (within one bf16 unit for the order of the fp32 sums).
TEST(LibraryStep, Bf16EpilogueRoundsTheFp32ResultOnce) {
  if (!kernels::cpu::dnnl_bf16_native()) GTEST_SKIP() << "no bf16 arithmetic on this CPU";
  const Tensor x = make(DType::kBFloat16, {2, 6, 4}, pseudo_random(48, 4));
  const Tensor wt = make(DType::kBFloat16, {5, 4}, pseudo_random(20, 5));
  const Tensor b = make(DType::kBFloat16, {5}, pseudo_random(5, 6));
  const Fold relu_bias_wt{plan::GemmParams::RELU_BIAS, false, true};
  const auto folded = run_folded("MatMul", relu_bias_wt, {x, wt, b}, 1);
  auto widened = [](const Tensor& v) { return make(DType::kFloat32, v.shape(), values(v)); };
  const auto f32 = run_folded("MatMul", relu_bias_wt, {widened(x), widened(wt), widened(b)}, 1);
  ASSERT_EQ(folded[0].shape(), f32[0].shape());
  const auto got = values(folded[0]), exact = values(f32[0]);
  int rounded_once = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float want = bf16_to_float(float_to_bf16(static_cast<float>(exact[i])));
    rounded_once += got[i] == want;
    EXPECT_NEAR(got[i], want, std::abs(want) / 128 + 1e-30) << i;
  }
  // Two roundings (product, then the biased sum) would differ from one in several places.
  EXPECT_GE(rounded_once, static_cast<int>(got.size()) - 2);
}

// Operands read through transposes (attention's [B, T, H, D] -> [B, H, T, D] and K^T) and the
// result written through one: rows contiguous ([0, 2, 1, 3]) or columns contiguous
// ([0, 3, 1, 2], computed as the transposed product). f32 through oneDNN's strided matmul
// and fp16 through the unfolded operators: the Transposes and MatMul, bit for bit; bf16 (on
// a CPU with bf16 arithmetic): the f32 product of the bf16 values rounded once.
TEST(LibraryStep, ViewsEqualTheTransposesAroundTheProduct) {
  const std::vector<int64_t> qa = {0, 2, 1, 3}, kt = {0, 2, 3, 1};
  for (const std::vector<int64_t>& perm_y : {qa, std::vector<int64_t>{0, 3, 1, 2}}) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      if (t == DType::kBFloat16 && !kernels::cpu::dnnl_bf16_native()) continue;
      SCOPED_TRACE(std::string(dtype_name(t)) + " perm_y " + std::to_string(perm_y[1]));
      const Tensor a = make(t, {2, 4, 3, 5}, pseudo_random(120, 8));
      const Tensor b = make(t, {2, 6, 3, 5}, pseudo_random(180, 9));
      const Fold views{plan::GemmParams::NONE, false, false, qa, kt, perm_y};
      const auto folded = run_folded("MatMul", views, {a, b}, 1);
      // f32 and bf16: one oneDNN call reads and writes the views (not the operators' fallback).
      if (t != DType::kFloat16) {
        const plan::Plan p = folded_plan("MatMul", views, {a, b}, 1, {});
        const DnnlFoldedMatmul::Folding f{.perm_a = qa, .perm_b = kt, .perm_y = perm_y};
        EXPECT_NE(DnnlFoldedMatmul::make(p.steps(0), p, f), nullptr);
      }
      auto unfolded = [&](const Tensor& x, const Tensor& y) {
        const Tensor xa = run("Transpose", {x}, {attr_ints("perm", qa)}, 1, 17)[0];
        const Tensor yb = run("Transpose", {y}, {attr_ints("perm", kt)}, 1, 17)[0];
        const Tensor z = run("MatMul", {xa, yb}, {}, 1, 17)[0];
        return run("Transpose", {z}, {attr_ints("perm", perm_y)}, 1, 17)[0];
      };
      if (t != DType::kBFloat16) {
        EXPECT_TRUE(same_bits(folded[0], unfolded(a, b)));
        continue;
      }
      auto widened = [](const Tensor& v) { return make(DType::kFloat32, v.shape(), values(v)); };
      const Tensor exact = unfolded(widened(a), widened(b));
      ASSERT_EQ(folded[0].shape(), exact.shape());
      const auto got = values(folded[0]), want = values(exact);
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(got[i], bf16_to_float(float_to_bf16(static_cast<float>(want[i])))) << i;
    }
  }
}

// A Gemm with its Relu folded (a Linear + ReLU of a training plan: the Relu's gradient reads
// its output, so the Gemm's result has one reader): one oneDNN call with C as the bias and the
// Relu as a post-op where C is a row of N (f32, and bf16 on a CPU with bf16 arithmetic), the
// operators' fallback for a full C or alpha != 1; each equal to the Gemm then the Relu (bf16:
// the f32 result on the bf16 values rounded once), and to float64 within rounding.
void expect_gemm_with_folded_relu(int64_t m, int64_t k, int64_t n) {
  const auto xv = pseudo_random(m * k, 10), wv = pseudo_random(n * k, 11);
  struct Case {
    std::vector<int64_t> c_shape;
    float alpha;
    bool one_call;
  };
  for (const Case& c : {Case{{n}, 1.0f, true}, Case{{1, n}, 1.0f, true}, Case{{}, 1.0f, true},
                        Case{{m, n}, 1.0f, false}, Case{{n}, 0.5f, false}}) {
    for (DType t : {DType::kFloat32, DType::kBFloat16}) {
      if (t == DType::kBFloat16 && !kernels::cpu::dnnl_bf16_native()) continue;
      SCOPED_TRACE(std::string(dtype_name(t)) + " n " + std::to_string(n) + " C rank " +
                   std::to_string(c.c_shape.size()) + " alpha " + std::to_string(c.alpha));
      const int64_t cn = c.c_shape.empty() ? 0 : c.c_shape.size() == 1 ? n : c.c_shape[0] * n;
      const auto cv = pseudo_random(cn, 12);
      std::vector<Tensor> in = {make(t, {m, k}, xv), make(t, {n, k}, wv)};  // W as Linear: [N, K]
      if (cn) in.push_back(make(t, c.c_shape, cv));
      const std::vector<plan::Attribute> attrs = {attr_i("transB", 1), attr_f("alpha", c.alpha)};
      const Fold relu{plan::GemmParams::RELU};
      const plan::Plan p = folded_plan("Gemm", relu, in, 1, attrs);
      const DnnlFoldedMatmul::Folding f{false, true, cn > 0, true, {}, {}, {}};
      EXPECT_EQ(DnnlFoldedMatmul::make(p.steps(0), p, f) != nullptr, c.one_call);
      const Tensor got = run_folded("Gemm", relu, in, 1, attrs)[0];
      std::vector<double> want(static_cast<size_t>(m * n));
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t q = 0; q < k; ++q) s += xv[i * k + q] * wv[j * k + q];
          s *= c.alpha;
          if (cn) s += cv[c.c_shape.size() == 2 && c.c_shape[0] == m ? i * n + j : j];
          want[i * n + j] = std::max(0.0, s);
        }
      }
      ASSERT_EQ(got.shape(), (std::vector<int64_t>{m, n}));
      expect_close(values(got), want, t == DType::kBFloat16 ? 2e-2 : 1e-5);
      if (t == DType::kFloat32) {
        const Tensor unfolded = run("Relu", {run("Gemm", in, attrs, 1, 17)[0]}, {}, 1, 17)[0];
        EXPECT_TRUE(same_bits(got, unfolded));
        continue;
      }
      // bf16: rounded once from the f32 result on the same (bf16) values.
      std::vector<Tensor> wide;
      for (const Tensor& v : in) wide.push_back(make(DType::kFloat32, v.shape(), values(v)));
      const auto exact = values(run_folded("Gemm", relu, wide, 1, attrs)[0]);
      const auto g = values(got);
      for (size_t i = 0; i < g.size(); ++i)
        EXPECT_EQ(g[i], bf16_to_float(float_to_bf16(static_cast<float>(exact[i])))) << i;
    }
  }
}

TEST(LibraryStep, GemmWithFoldedReluIsOneCallOrTheOperators) {
  expect_gemm_with_folded_relu(6, 5, 4);
  expect_gemm_with_folded_relu(6, 5, 5);  // a square W: read untransposed, it would still fit
}

TEST(LibraryStep, BiasGradientIsTheColumnSumOfB) {
  // dW = A^T dY (Gemm transA) with BGRADB: db = sum over the rows of dY.
  const Tensor a = make(DType::kFloat32, {6, 3}, pseudo_random(18, 7));
  const auto dyv = pseudo_random(24, 8);
  const Tensor dy = make(DType::kFloat32, {6, 4}, dyv);
  const auto out =
      run_folded("Gemm", {plan::GemmParams::BGRADB}, {a, dy}, 2, {attr_i("transA", 1)});
  std::vector<double> want(4, 0.0);
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j < 4; ++j) want[j] += dyv[i * 4 + j];
  }
  ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{4}));
  expect_close(values(out[1]), want, 1e-6);
  const Tensor sum =
      run("ReduceSum", {dy}, {attr_ints("axes", {0}), attr_i("keepdims", 0)}, 1, 11)[0];
  EXPECT_TRUE(same_bits(out[1], sum));
  const Tensor dw = run("Gemm", {a, dy}, {attr_i("transA", 1)}, 1, 17)[0];
  EXPECT_TRUE(same_bits(out[0], dw));
}

// An epilogue value this build does not know (a plan from a newer ampc) is refused with its
// number and the node.
TEST(LibraryStep, UnknownEpilogueIsRefusedByNumber) {
  const Tensor a = make(DType::kFloat32, {2, 2}, {1, 2, 3, 4});
  try {
    run_folded("MatMul", {static_cast<plan::GemmParams::Epilogue>(9)}, {a, a}, 1);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("epilogue #9"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("node 'gemm'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ampc::rt::cpu
