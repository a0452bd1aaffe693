// reductions_for_cuda (passes/reductions_for_cuda.h): ArgMax, ArgMin, TopK, ReduceLogSumExp and
// CumSum rewritten into ops the CUDA backend runs give the CPU ops' results on the CPU
// backend: the same indices (ties, select_last_index, NaN), the same top k values and indices
// (largest and smallest, ties, NaN, infinities, k up to the whole axis; by rounds, and by
// ranks for int64 and int32 with their extremes and for floats with k above 32), the same
// log-sum-exp within rounding (rows of -inf, of +inf, with a NaN), the same running sums (exact for
// int64, within rounding for floats; exclusive, reverse, an axis of one), the same integer sums,
// maxima and minima (odd lengths, several axes) in fp32 and fp16, at opsets
// 12 (fp32 only) and 17 (ReduceSum's axes an attribute, then an input). ONNX's own data for these
// ops runs through the rewrite too (the conformance suite compiles for the default CUDA target).
#include "passes/reductions_for_cuda.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/half.h"
#include "tests/passes/cuda_rewrite_test_util.h"

namespace ampc::passes {
namespace {

using Shape = std::vector<int64_t>;

std::unique_ptr<ir::Model> make_model(DType t, int64_t opset) {
  auto m = std::make_unique<ir::Model>();
  m->opsets = {{"", opset}};
  ir::Graph& g = *m->graph;
  g.name = "reductions";
  auto input = [&](const std::string& name, Shape s, DType dt) {
    return test_util::add_input(g, name, std::move(s), dt);
  };
  auto ints = [&](const std::string& name, Shape s, std::vector<int64_t> values) {
    return test_util::add_ints(g, name, std::move(s), values);
  };
  auto node = [&](const std::string& op, std::vector<ir::Value*> in, Shape out, DType dt,
                  std::vector<ir::Attribute> attributes) {
    ir::Value* y = g.add_value(op + std::to_string(g.nodes.size()), {dt, std::move(out)});
    g.outputs.push_back(y);
    ir::Node* n = g.add_node(op, std::move(in), {y}, y->name);
    n->attributes = std::move(attributes);
  };
  using A = ir::Attribute;
  auto attrs = [](auto... a) {
    std::vector<A> v;
    (v.push_back(std::move(a)), ...);
    return v;
  };
  const DType i64 = DType::kInt64;
  ir::Value* x = input("x", {3, 4, 5}, t);
  ir::Value* k = input("k", {3, 6}, i64);
  node("ArgMax", {x}, {3, 1, 5}, i64, attrs(A::make_int("axis", 1)));
  node("ArgMax", {x}, {3, 4}, i64,
       attrs(A::make_int("axis", -1), A::make_int("keepdims", 0),
             A::make_int("select_last_index", 1)));
  node("ArgMin", {x}, {4, 5}, i64, attrs(A::make_int("keepdims", 0)));
  node("ArgMin", {x}, {3, 4, 1}, i64,
       attrs(A::make_int("axis", 2), A::make_int("select_last_index", 1)));
  // ReduceLogSumExp over one axis, two, and all of them.
  // A Reduce node with its axes as the opset has them: an input for ReduceSum from opset 13.
  auto reduce = [&](const std::string& op, ir::Value* in, std::vector<int64_t> axes, Shape out,
                    bool keep) {
    std::vector<A> a = attrs(A::make_int("keepdims", keep ? 1 : 0));
    std::vector<ir::Value*> operands = {in};
    if (op == "ReduceSum" && opset >= 13) {
      operands.push_back(
          ints("axes" + std::to_string(g.nodes.size()), {static_cast<int64_t>(axes.size())}, axes));
    } else {
      a.push_back(A::make_ints("axes", axes));
    }
    node(op, operands, std::move(out), in->type.dtype, std::move(a));
  };
  reduce("ReduceLogSumExp", x, {-1}, {3, 4}, false);
  reduce("ReduceLogSumExp", x, {0, 2}, {1, 4, 1}, true);
  node("ReduceLogSumExp", {x}, {1, 1, 1}, t, {});
  // Integer reductions: axes of 6 (halved to 3, an odd length) and 3, both, all by default.
  reduce("ReduceSum", k, {1}, {3}, false);
  reduce("ReduceSum", k, {0}, {1, 6}, true);
  node("ReduceSum", {k}, {1, 1}, i64, {});
  reduce("ReduceMax", k, {-1}, {3, 1}, true);
  reduce("ReduceMin", k, {0, 1}, {}, false);
  // CumSum: each flag, both, an int64 scan, and exclusive over an axis of one element.
  ir::Value* axis1 = ints("axis1", {}, {1});
  ir::Value* last = ints("last", {}, {-1});
  ir::Value* first = ints("first", {}, {0});
  node("CumSum", {x, axis1}, {3, 4, 5}, t, {});
  node("CumSum", {x, last}, {3, 4, 5}, t, attrs(A::make_int("exclusive", 1)));
  node("CumSum", {x, last}, {3, 4, 5}, t, attrs(A::make_int("reverse", 1)));
  node("CumSum", {x, axis1}, {3, 4, 5}, t,
       attrs(A::make_int("reverse", 1), A::make_int("exclusive", 1)));
  node("CumSum", {k, last}, {3, 6}, i64, {});
  node("CumSum", {k, first}, {3, 6}, i64, attrs(A::make_int("reverse", 1)));
  // TopK: largest and smallest, k of 1, 3 and the whole axis (NaN, -inf and +inf in order).
  auto top_k_of = [&](ir::Value* in, int64_t k, int64_t axis, bool largest, Shape out) {
    const DType dt = in->type.dtype;
    ir::Value* values = g.add_value("top_values" + std::to_string(g.nodes.size()), {dt, out});
    ir::Value* indices = g.add_value("top_indices" + std::to_string(g.nodes.size()), {i64, out});
    g.outputs.push_back(values);
    g.outputs.push_back(indices);
    ir::Node* n = g.add_node("TopK", {in, ints("k" + std::to_string(g.nodes.size()), {1}, {k})},
                             {values, indices}, values->name);
    n->attributes = attrs(A::make_int("axis", axis), A::make_int("largest", largest ? 1 : 0));
  };
  auto top_k = [&](int64_t k, int64_t axis, bool largest, Shape out) {
    top_k_of(x, k, axis, largest, std::move(out));
  };
  top_k(3, 1, true, {3, 3, 5});
  top_k(2, -1, false, {3, 4, 2});
  top_k(1, 0, true, {1, 4, 5});
  top_k(5, 2, false, {3, 4, 5});
  top_k(5, 2, true, {3, 4, 5});
  // By ranks: integers (torch.sort of lengths, argsort of tokens; ties), and floats with a k
  // above 32 (a whole axis of 40 and 35 of it: ties, NaNs, infinities, zeros of both signs).
  top_k_of(k, 6, 1, true, {3, 6});
  top_k_of(k, 2, 0, false, {2, 6});
  top_k_of(k, 6, -1, false, {3, 6});
  ir::Value* k32 = input("k32", {2, 7}, DType::kInt32);
  top_k_of(k32, 7, 1, true, {2, 7});
  top_k_of(k32, 1, 0, false, {1, 7});
  ir::Value* wide = input("wide", {2, 40}, t);
  top_k_of(wide, 40, 1, true, {2, 40});
  top_k_of(wide, 35, -1, false, {2, 35});
  ir::Value* column = input("column", {3, 1}, t);
  node("CumSum", {column, last}, {3, 1}, t, attrs(A::make_int("exclusive", 1)));
  return m;
}

// x [3, 4, 5]: pseudo-random values with ties, NaNs, a row of -inf, a +inf and zeros of both
// signs.
std::map<std::string, rt::Tensor> inputs(DType t) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs(60);
  for (size_t i = 0; i < xs.size(); ++i)
    xs[i] = static_cast<float>(static_cast<int>((i * 7) % 11)) * 0.25f - 1.0f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  xs[7] = nan;                                    // x[0, 1, 2]
  xs[2] = xs[12] = xs[17] = 0.5f;                 // its column's other elements, tied
  for (size_t i = 20; i < 25; ++i) xs[i] = -inf;  // x[1, 0, :]
  xs[33] = inf;                                   // x[1, 2, 3]
  for (size_t i : {40, 41, 43}) xs[i] = 2;        // x[2, 0, :]: ties
  xs[42] = xs[44] = -1;
  xs[45] = -0.0f;  // x[2, 1, :]: zeros of both signs
  xs[46] = 0.0f;
  xs[50] = xs[53] = nan;  // x[2, 2, :]: two NaNs
  auto make = [&](const Shape& shape, const std::vector<float>& v) {
    rt::Tensor a(t, shape);
    for (int64_t i = 0; i < a.numel(); ++i) {
      const float f = v[static_cast<size_t>(i)];
      if (t == DType::kFloat16)
        a.data<Half>()[i] = float_to_half(f);
      else
        a.data<float>()[i] = f;
    }
    return a;
  };
  std::map<std::string, rt::Tensor> in;
  in["x"] = make({3, 4, 5}, xs);
  in["column"] = make({3, 1}, {1.5f, -2, 4});
  // wide [2, 40]: a row of few distinct values (ties), a NaN, both infinities and both zeros;
  // a row with two NaNs and distinct values.
  std::vector<float> ws(80);
  for (size_t i = 0; i < ws.size(); ++i)
    ws[i] = static_cast<float>(static_cast<int>((i * 13) % (i < 40 ? 7 : 41))) * 0.5f - 2.0f;
  ws[3] = nan;
  ws[9] = inf;
  ws[17] = -inf;
  ws[21] = -0.0f;
  ws[22] = 0.0f;
  ws[45] = ws[70] = nan;
  in["wide"] = make({2, 40}, ws);
  rt::Tensor k32(DType::kInt32, {2, 7});
  for (int32_t i = 0; i < 14; ++i) k32.data<int32_t>()[i] = (i * 3) % 5 - 2;
  k32.data<int32_t>()[0] = std::numeric_limits<int32_t>::min();
  k32.data<int32_t>()[13] = std::numeric_limits<int32_t>::max();
  in["k32"] = k32;
  rt::Tensor k(DType::kInt64, {3, 6});
  for (int64_t i = 0; i < 18; ++i) k.data<int64_t>()[i] = (i * 5) % 7 - 3;
  in["k"] = k;
  return in;
}

double element(const rt::Tensor& a, int64_t i) {
  switch (a.dtype()) {
    case DType::kFloat16:
      return half_to_float(a.data<Half>()[i]);
    case DType::kFloat32:
      return a.data<float>()[i];
    default:
      return static_cast<double>(a.data<int64_t>()[i]);
  }
}

class ReductionsForCuda : public ::testing::TestWithParam<int64_t> {};

TEST_P(ReductionsForCuda, GiveTheCpuOpsResults) {
  const int64_t opset = GetParam();
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    if (t == DType::kFloat16 && opset < 14) continue;  // CumSum takes fp16 from opset 14
    auto plain = make_model(t, opset);
    auto rewritten = make_model(t, opset);
    EXPECT_EQ(reductions_for_cuda(*rewritten), 31);
    for (const auto& n : rewritten->graph->nodes) {
      EXPECT_TRUE(n->op_type != "ArgMax" && n->op_type != "ArgMin" && n->op_type != "TopK" &&
                  n->op_type != "ReduceLogSumExp" && n->op_type != "CumSum" &&
                  (n->inputs.empty() || n->inputs[0]->type.dtype != DType::kInt64 ||
                   n->op_type.rfind("Reduce", 0) != 0))
          << n->label();
    }
    const auto want = test_util::run_on_cpu(*plain, inputs(t));
    const auto got = test_util::run_on_cpu(*rewritten, inputs(t));
    ASSERT_EQ(got.size(), want.size());
    // One rounding of the widest result apart: the sums run in another order.
    const double ulp = t == DType::kFloat16 ? 1.0 / 1024 : 1.0 / (1 << 22);
    for (const auto& [name, w] : want) {
      const rt::Tensor& g = got.at(name);
      ASSERT_EQ(g.shape(), w.shape()) << name;
      ASSERT_EQ(g.dtype(), w.dtype()) << name;
      // Selections are the CPU op's bits (a zero's sign, a NaN included); so are integer sums.
      const bool exact =
          name.rfind("Arg", 0) == 0 || name.rfind("top_", 0) == 0 || w.dtype() == DType::kInt64;
      if (exact) {
        EXPECT_EQ(std::memcmp(g.raw(), w.raw(), w.nbytes()), 0) << name << " " << dtype_name(t);
        continue;
      }
      for (int64_t i = 0; i < w.numel(); ++i) {
        const double e = element(w, i), r = element(g, i);
        if (std::isnan(e) || std::isinf(e) || w.dtype() == DType::kInt64) {
          EXPECT_TRUE(r == e || (std::isnan(r) && std::isnan(e)))
              << name << "[" << i << "] " << r << " vs " << e << " " << dtype_name(t);
        } else {
          EXPECT_NEAR(r, e, ulp * std::max(1.0, std::fabs(e)))
              << name << "[" << i << "] " << dtype_name(t);
        }
      }
    }
  }
}

// TopK by ranks costs the same steps for any k (the rounds cost a few for each of the k): a
// sort of a whole axis of 1000 stays a graph of a few dozen nodes (29 for floats, 55 for
// integers, whose values are read back by halving), where rounds would take thousands.
TEST(ReductionsForCudaTopK, ByRanksInAFixedNumberOfSteps) {
  for (DType t : {DType::kFloat32, DType::kInt64}) {
    ir::Model m;
    m.opsets = {{"", 17}};
    ir::Graph& g = *m.graph;
    ir::Value* x = test_util::add_input(g, "x", {2, 1000}, t);
    ir::Value* values = g.add_value("values", {t, Shape{2, 1000}});
    ir::Value* indices = g.add_value("indices", {DType::kInt64, Shape{2, 1000}});
    g.outputs = {values, indices};
    g.add_node("TopK", {x, test_util::add_ints(g, "k", {1}, {1000})}, {values, indices}, "sort");
    ASSERT_EQ(reductions_for_cuda(m), 1) << dtype_name(t);
    EXPECT_LT(g.nodes.size(), 80u) << dtype_name(t);
  }
}

// Opset 12: ReduceSum's axes an attribute too.
INSTANTIATE_TEST_SUITE_P(Opsets, ReductionsForCuda, ::testing::Values(12, 17));

}  // namespace
}  // namespace ampc::passes
