// lower_einsum (passes/lower_einsum.h) on hand-built graphs: attention scores become one
// batched MatMul with the Einsum's output value and a static shape, an implicit output
// follows numpy's rule, and what it does not lower is refused naming the node. The values
// and gradients are checked against PyTorch float64 by the einsum model of
// tests/oracle/model_oracle.py.
#include "passes/lower_einsum.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "ir/verifier.h"
#include "tests/support/empty_model.h"

namespace ampc::passes {
namespace {

using Shape = std::vector<int64_t>;

struct Graph {
  std::unique_ptr<ir::Model> model = test::empty_model();
  ir::Graph& g = *model->graph;

  ir::Value* input(const std::string& name, Shape s) {
    ir::Value* v = g.add_value(name, {DType::kFloat32, std::move(s)});
    v->is_graph_input = true;
    g.inputs.push_back(v);
    return v;
  }
  // Einsum of `in` by `equation`, its output of unknown dimensions as ONNX's inference gives.
  ir::Value* einsum(const std::string& equation, std::vector<ir::Value*> in, size_t rank) {
    ir::Value* y = g.add_value("y", {DType::kFloat32, Shape(rank, -1)});
    g.add_node("Einsum", std::move(in), {y}, "attention")
        ->attributes.push_back(ir::Attribute::make_string("equation", equation));
    g.outputs.push_back(y);
    return y;
  }
  std::map<std::string, int> ops() const {
    std::map<std::string, int> count;
    for (const auto& n : g.nodes) ++count[n->op_type];
    return count;
  }
};

TEST(LowerEinsum, AttentionScoresAreOneBatchedMatMul) {
  Graph t;
  ir::Value* y =
      t.einsum("bqhd,bkhd->bhqk", {t.input("q", {2, 5, 4, 8}), t.input("k", {2, 7, 4, 8})}, 4);
  EXPECT_EQ(lower_einsum(*t.model), 1);
  ir::verify(*t.model);
  EXPECT_EQ(*y->type.shape, (Shape{2, 4, 5, 7}));
  const auto ops = t.ops();
  EXPECT_EQ(ops.count("Einsum"), 0u);
  EXPECT_EQ(ops.at("MatMul"), 1);
  ASSERT_NE(y->producer, nullptr);
  EXPECT_EQ(y->producer->op_type, "Reshape");  // [b h, q, k] back to [b, h, q, k]
}

TEST(LowerEinsum, ImplicitOutputIsTheOnceUsedSubscriptsSorted) {
  Graph t;
  // "kj,ji": j is summed; k and i are kept in alphabetical order: [i, k].
  ir::Value* y = t.einsum("kj,ji", {t.input("a", {3, 4}), t.input("b", {4, 2})}, 2);
  EXPECT_EQ(lower_einsum(*t.model), 1);
  ir::verify(*t.model);
  EXPECT_EQ(*y->type.shape, (Shape{2, 3}));
  EXPECT_EQ(y->producer->op_type, "Transpose");
}

TEST(LowerEinsum, LeavesADiagonalAndRefusesMismatchedSizes) {
  Graph diag;  // the CPU op's, for inference
  diag.einsum("bii->bi", {diag.input("a", {2, 3, 3})}, 2);
  EXPECT_EQ(lower_einsum(*diag.model), 0);
  EXPECT_EQ(diag.ops().count("Einsum"), 1u);
  Graph sizes;
  sizes.einsum("ij,jk->ik", {sizes.input("a", {3, 4}), sizes.input("b", {5, 2})}, 2);
  try {
    lower_einsum(*sizes.model);
    FAIL() << "lowered";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "node 'attention' (Einsum): subscript 'j' has sizes 4 and 5");
  }
}

TEST(LowerEinsum, WaitsForStaticOperands) {
  Graph t;
  t.einsum("ij,jk->ik", {t.input("a", {3, -1}), t.input("b", {4, 2})}, 2);
  EXPECT_EQ(lower_einsum(*t.model), 0);
  EXPECT_EQ(t.ops().count("Einsum"), 1u);
}

}  // namespace
}  // namespace ampc::passes
