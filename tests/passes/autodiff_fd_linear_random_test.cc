// Gradient rules of MatMul and Gemm (rules_linear.cc) against finite differences in fp64,
// on random sizes from a seeded generator: MatMul with batch dims broadcast on both sides
// and 1-D operands; Gemm with every transA/transB, random alpha and beta, and C absent or of
// every shape that broadcasts to the output.
#include <gtest/gtest.h>

#include "passes/autodiff/autodiff.h"
#include "tests/passes/fd_check.h"

namespace ampc {
namespace {

using namespace ampc::fd;  // NOLINT: the test speaks the harness vocabulary

using ir::Attribute;
using passes::autodiff::attrs;
using passes::autodiff::GradBuilder;
using P = const std::vector<ir::Value*>&;

Shape cat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Case matmul(const Shape& a, const Shape& b, const Shape& out) {
  return {"MatMul_" + str(a) + "_" + str(b), {a, b}, out, [out](GradBuilder& g, P p) {
            return g.op("MatMul", {p[0], p[1]}, f64(out));
          }};
}

TEST(AutodiffFdLinearRandom, MatMulBatchedBroadcast) {
  Random rnd(21);
  for (int k = 0; k < 12; ++k) {
    const Shape batch = rnd.shape(rnd.uniform(1, 2), 1, 3);
    const auto [ba, bb] = rnd.broadcast_pair(batch);
    const int64_t m = rnd.uniform(1, 3), n = rnd.uniform(1, 3), kk = rnd.uniform(1, 3);
    check(matmul(cat(ba, {m, kk}), cat(bb, {kk, n}), cat(batch, {m, n})));
  }
}

TEST(AutodiffFdLinearRandom, MatMulVectors) {
  Random rnd(22);
  for (int k = 0; k < 4; ++k) {
    const Shape batch = rnd.shape(rnd.uniform(0, 2), 1, 3);
    const int64_t m = rnd.uniform(1, 3), n = rnd.uniform(1, 3), kk = rnd.uniform(2, 4);
    check(matmul({kk}, cat(batch, {kk, n}), cat(batch, {n})));  // vector @ batched matrix
    check(matmul(cat(batch, {m, kk}), {kk}, cat(batch, {m})));  // batched matrix @ vector
  }
  check(matmul({3}, {3}, {}));  // dot product
}

// W's gradient where one matrix W is shared by a batched A: one GEMM with the batch folded
// into K (rules_linear.cc's shared_weight_grad), checked here for its values against finite
// differences, and for its form: the MatMul that makes dW is [K, B*M] x [B*M, N] -> [K, N],
// and no per-sample [B, K, N] products exist to be summed afterwards.
TEST(AutodiffFdLinearRandom, SharedWeightGradientIsOneGemm) {
  struct Shared {
    Shape a, w, out;
  };
  for (const Shared& t :
       {Shared{{3, 2, 4}, {4, 5}, {3, 2, 5}}, Shared{{2, 3, 2, 4}, {4, 5}, {2, 3, 2, 5}},
        Shared{{3, 2, 4}, {1, 4, 5}, {3, 2, 5}}}) {
    const Case c = matmul(t.a, t.w, t.out);
    check(c);
    Values values = {std::vector<double>(static_cast<size_t>(ir::shape_numel(t.a)), 0.1),
                     std::vector<double>(static_cast<size_t>(ir::shape_numel(t.w)), 0.2)};
    auto m = make_model(c, values,
                        std::vector<double>(static_cast<size_t>(ir::shape_numel(t.out)), 0.5));
    const auto grads = passes::differentiate(*m, {.loss = "", .freeze = {"R", "fwd/*"}});
    const ir::Value* dw = nullptr;
    for (const auto& pg : grads) dw = pg.parameter->name == "p1" ? pg.gradient : dw;
    ASSERT_NE(dw, nullptr) << c.name;
    while (dw->producer && dw->producer->op_type == "Reshape") dw = dw->producer->inputs[0];
    ASSERT_NE(dw->producer, nullptr) << c.name;
    const ir::Node& gemm = *dw->producer;
    EXPECT_EQ(gemm.op_type, "MatMul") << c.name;
    const int64_t k = t.w[t.w.size() - 2], n = t.w.back();
    const int64_t rows = ir::shape_numel(t.a) / k;
    EXPECT_EQ(*dw->type.shape, (Shape{k, n})) << c.name;
    ASSERT_EQ(gemm.inputs.size(), 2u);
    EXPECT_EQ(*gemm.inputs[0]->type.shape, (Shape{k, rows})) << c.name;
    EXPECT_EQ(*gemm.inputs[1]->type.shape, (Shape{rows, n})) << c.name;
    Shape per_sample(t.a.begin(), t.a.end() - 2);
    per_sample.push_back(k);
    per_sample.push_back(n);
    for (const auto& node : m->graph->nodes) {
      for (const ir::Value* o : node->outputs) {
        EXPECT_FALSE(o->type.shape && *o->type.shape == per_sample)
            << c.name << ": per-sample weight gradients " << str(per_sample) << " from "
            << node->op_type;
      }
    }
  }
}

// A Linear layer as torch exports it, MatMul(X, Transpose(W)) with W [N, K]: W's gradient
// against finite differences, and its form: one MatMul in W's own layout [N, K] (dY^T X, the
// transpose rule's (P Q)^T = Q^T P^T), not a MatMul in W^T's layout transposed afterwards.
TEST(AutodiffFdLinearRandom, LinearWeightGradientInItsOwnLayout) {
  for (const Shape& x : {Shape{3, 4}, Shape{2, 3, 4}}) {
    Shape out = x;
    out.back() = 5;
    const Case c = {"Linear_" + str(x), {x, {5, 4}}, out, [out](GradBuilder& g, P p) {
                      ir::Value* wt = g.op("Transpose", {p[1]}, f64({4, 5}),
                                           attrs(Attribute::make_ints("perm", {1, 0})));
                      return g.op("MatMul", {p[0], wt}, f64(out));
                    }};
    check(c);
    Values values = {std::vector<double>(static_cast<size_t>(ir::shape_numel(x)), 0.1),
                     std::vector<double>(20, 0.2)};
    auto m =
        make_model(c, values, std::vector<double>(static_cast<size_t>(ir::shape_numel(out)), 0.5));
    const auto grads = passes::differentiate(*m, {.loss = "", .freeze = {"R", "fwd/*"}});
    const ir::Value* dw = nullptr;
    for (const auto& pg : grads) dw = pg.parameter->name == "p1" ? pg.gradient : dw;
    ASSERT_NE(dw, nullptr) << c.name;
    ASSERT_NE(dw->producer, nullptr) << c.name;
    EXPECT_EQ(dw->producer->op_type, "MatMul") << c.name;
    EXPECT_EQ(*dw->type.shape, (Shape{5, 4})) << c.name;
  }
}

// The same with the product a Gemm (a 16-bit linear layer after passes/linear_as_gemm.h), its
// own transA and alpha: W's gradient against finite differences, and one Gemm in W's layout.
TEST(AutodiffFdLinearRandom, GemmLinearWeightGradientInItsOwnLayout) {
  for (const bool ta : {false, true}) {
    for (const float alpha : {1.0f, -1.5f}) {
      const Shape x = ta ? Shape{4, 3} : Shape{3, 4};
      const Case c = {"GemmLinear_t" + std::to_string(ta) + "_a" + std::to_string(alpha),
                      {x, {5, 4}},
                      {3, 5},
                      [=](GradBuilder& g, P p) {
                        ir::Value* wt = g.op("Transpose", {p[1]}, f64({4, 5}),
                                             attrs(Attribute::make_ints("perm", {1, 0})));
                        return g.op("Gemm", {p[0], wt}, f64({3, 5}),
                                    attrs(Attribute::make_float("alpha", alpha),
                                          Attribute::make_int("transA", ta)));
                      }};
      check(c);
      Values values = {std::vector<double>(12, 0.1), std::vector<double>(20, 0.2)};
      auto m = make_model(c, values, std::vector<double>(15, 0.5));
      const auto grads = passes::differentiate(*m, {.loss = "", .freeze = {"R", "fwd/*"}});
      const ir::Value* dw = nullptr;
      for (const auto& pg : grads) dw = pg.parameter->name == "p1" ? pg.gradient : dw;
      ASSERT_NE(dw, nullptr) << c.name;
      ASSERT_NE(dw->producer, nullptr) << c.name;
      EXPECT_EQ(dw->producer->op_type, "Gemm") << c.name;
      EXPECT_EQ(*dw->type.shape, (Shape{5, 4})) << c.name;
    }
  }
}

TEST(AutodiffFdLinearRandom, Gemm) {
  Random rnd(23);
  const int64_t m = 2, n = 3;
  const std::vector<Shape> c_shapes = {{}, {n}, {m, 1}, {1, n}, {m, n}};
  for (int k = 0; k < 16; ++k) {
    const bool ta = (k & 1) != 0, tb = (k & 2) != 0;
    const int64_t kk = rnd.uniform(1, 3);
    const auto alpha = static_cast<float>(rnd.real(-2.0, 2.0));
    const auto beta = static_cast<float>(rnd.real(-2.0, 2.0));
    const bool has_c = k % 8 != 0;
    const Shape c = rnd.pick(c_shapes);
    std::vector<Shape> params = {ta ? Shape{kk, m} : Shape{m, kk},
                                 tb ? Shape{n, kk} : Shape{kk, n}};
    if (has_c) params.push_back(c);
    const std::string name = "Gemm_t" + std::to_string(ta) + std::to_string(tb) + "_k" +
                             std::to_string(kk) + (has_c ? "_C" + str(c) : "_noC");
    check({name, params, {m, n}, [=](GradBuilder& g, P p) {
             auto a = attrs(Attribute::make_float("alpha", alpha),
                            Attribute::make_int("transA", ta), Attribute::make_int("transB", tb));
             if (k % 3 != 0) a.push_back(Attribute::make_float("beta", beta));  // else beta = 1
             return g.op("Gemm", p, f64({m, n}), std::move(a));
           }});
  }
}

}  // namespace
}  // namespace ampc
