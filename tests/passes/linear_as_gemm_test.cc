// linear_as_gemm (passes/linear_as_gemm.h): after autocast, a 16-bit Add(MatMul(x, W), b)
// with x of rank 3 and b a 1-D parameter becomes Reshape -> Gemm(., W, b) -> Reshape, with the
// report following; other pairs are left alone. That the rewritten plan rounds as PyTorch's
// linear does is checked against PyTorch by tests/oracle/linear_rounding_oracle.py.
#include "passes/linear_as_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

namespace ampc::passes {
namespace {

ir::Value* parameter(ir::Graph& g, const std::string& name, std::vector<int64_t> dims) {
  std::vector<double> values(static_cast<size_t>(dims[0] * (dims.size() > 1 ? dims[1] : 1)), 0.5);
  ir::Tensor t = ir::tensor_of<float>(DType::kFloat32, DType::kFloat64, dims, values);
  ir::Value* v = g.add_value(name, {DType::kFloat32, dims});
  t.name = name;
  v->initializer = std::make_unique<ir::Tensor>(std::move(t));
  v->from_model = true;
  g.initializers.push_back(v);
  return v;
}

// y = Add(MatMul(x, W), b) in fp32, x of the given shape, W [4, 5], b [5]; `extra_reader`: the
// product is also a graph output.
std::unique_ptr<ir::Model> linear(std::vector<int64_t> x_shape, bool extra_reader = false) {
  auto m = std::make_unique<ir::Model>();
  m->opsets.push_back({"", 17});
  m->graph->name = "g";
  ir::Graph& g = *m->graph;
  ir::Value* x = g.add_value("x", {DType::kFloat32, x_shape});
  g.inputs.push_back(x);
  ir::Value* w = parameter(g, "w", {4, 5});
  ir::Value* b = parameter(g, "b", {5});
  std::vector<int64_t> y_shape = x_shape;
  y_shape.back() = 5;
  ir::Value* p = g.add_value("p", {DType::kFloat32, y_shape});
  ir::Value* y = g.add_value("y", {DType::kFloat32, y_shape});
  g.add_node("MatMul", {x, w}, {p}, "mm");
  g.add_node("Add", {p, b}, {y}, "add");
  g.outputs.push_back(y);
  if (extra_reader) g.outputs.push_back(p);
  return m;
}

AutocastReport autocast(ir::Model& m, Precision p) {
  AutocastOptions o;
  o.precision = p;
  return apply_autocast(m, o);
}

const ir::Node* find(const ir::Graph& g, const std::string& op) {
  for (const auto& n : g.nodes) {
    if (n->op_type == op) return n.get();
  }
  return nullptr;
}

TEST(LinearAsGemm, Bf16LinearOnRankThreeBecomesOneGemmOverTheRows) {
  auto m = linear({2, 3, 4});
  AutocastReport report = autocast(*m, Precision::kBF16);
  const std::string sum_name = find(*m->graph, "Add")->outputs[0]->name;
  ASSERT_EQ(linear_layers_as_gemm(*m, &report), 1);
  const ir::Graph& g = *m->graph;
  EXPECT_EQ(find(g, "MatMul"), nullptr);
  EXPECT_EQ(find(g, "Add"), nullptr);
  const ir::Node* gemm = find(g, "Gemm");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->name, "mm");
  EXPECT_EQ(gemm->attributes.size(), 0u);  // alpha = beta = 1, nothing transposed
  ASSERT_EQ(gemm->inputs.size(), 3u);
  EXPECT_EQ(*gemm->inputs[0]->type.shape, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(gemm->inputs[0]->producer->op_type, "Reshape");
  EXPECT_EQ(gemm->inputs[0]->type.dtype, DType::kBFloat16);
  EXPECT_EQ(*gemm->inputs[2]->type.shape, (std::vector<int64_t>{5}));  // the bias, cast down
  EXPECT_EQ(gemm->inputs[2]->type.dtype, DType::kBFloat16);
  const ir::Value* product = gemm->outputs[0];
  EXPECT_EQ(*product->type.shape, (std::vector<int64_t>{6, 5}));
  ASSERT_EQ(product->uses.size(), 1u);
  const ir::Node* rows_back = product->uses[0].node;
  EXPECT_EQ(rows_back->op_type, "Reshape");
  // The Add's result keeps its name and its reader (the Cast back to the fp32 output).
  EXPECT_EQ(rows_back->outputs[0]->name, sum_name);
  ASSERT_EQ(rows_back->outputs[0]->uses.size(), 1u);
  EXPECT_EQ(rows_back->outputs[0]->uses[0].node->op_type, "Cast");
  EXPECT_EQ(*rows_back->outputs[0]->type.shape, (std::vector<int64_t>{2, 3, 5}));
  // The order is topological: each node after its inputs' producers.
  std::vector<const ir::Node*> order;
  for (const auto& n : g.nodes) order.push_back(n.get());
  auto pos = [&](const ir::Node* n) { return std::find(order.begin(), order.end(), n); };
  for (const ir::Value* in : gemm->inputs) {
    if (in->producer) {
      EXPECT_LT(pos(in->producer), pos(gemm));
    }
  }
  // The report: the Gemm under the MatMul's name, no Add, the two Reshapes.
  bool gemm_decided = false, add_decided = false;
  int reshapes = 0;
  for (const auto& d : report.nodes) {
    gemm_decided |= d.node == "'mm' (Gemm)" && d.compute_dtype == DType::kBFloat16 &&
                    d.rule.find("rounded once") != std::string::npos;
    add_decided |= d.node == "'add' (Add)";
    reshapes += d.op_type == "Reshape";
  }
  EXPECT_TRUE(gemm_decided);
  EXPECT_FALSE(add_decided);
  EXPECT_EQ(reshapes, 2);
}

TEST(LinearAsGemm, Fp16LinearIsRewrittenToo) {
  auto m = linear({2, 3, 4});
  autocast(*m, Precision::kFP16);
  EXPECT_EQ(linear_layers_as_gemm(*m), 1);
  EXPECT_EQ(find(*m->graph, "Gemm")->outputs[0]->type.dtype, DType::kFloat16);
}

// torch's linear rounds twice on rank 4 (matmul, then add_), fp32 has nothing to round, and a
// product with another reader has to exist anyway.
TEST(LinearAsGemm, OtherPairsAreLeftAlone) {
  struct Case {
    const char* what;
    std::vector<int64_t> x_shape;
    Precision precision;
    bool extra_reader;
  };
  for (const Case& c : {Case{"rank 4", {2, 2, 3, 4}, Precision::kBF16, false},
                        Case{"rank 2", {3, 4}, Precision::kBF16, false},
                        Case{"fp32", {2, 3, 4}, Precision::kFP32, false},
                        Case{"product read twice", {2, 3, 4}, Precision::kBF16, true}}) {
    SCOPED_TRACE(c.what);
    auto m = linear(c.x_shape, c.extra_reader);
    AutocastReport report = autocast(*m, c.precision);
    EXPECT_EQ(linear_layers_as_gemm(*m, &report), 0);
    // The report says why a linear layer of rank 4 keeps two roundings.
    bool noted = false;
    for (const auto& d : report.nodes)
      noted |= d.node == "'add' (Add)" && d.rule.find("rounded apart") != std::string::npos;
    EXPECT_EQ(noted, c.x_shape.size() == 4);
    EXPECT_NE(find(*m->graph, "MatMul"), nullptr);
    EXPECT_EQ(find(*m->graph, "Gemm"), nullptr);
  }
}

// A bias that is not a parameter (here a graph input) is not a linear layer's.
TEST(LinearAsGemm, ABiasThatIsNoParameterIsLeftAlone) {
  auto m = linear({2, 3, 4});
  ir::Graph& g = *m->graph;
  ir::Value* b = g.add_value("b_in", {DType::kFloat32, std::vector<int64_t>{5}});
  g.inputs.push_back(b);
  ir::set_input(g.nodes[1].get(), 1, b);
  autocast(*m, Precision::kBF16);
  EXPECT_EQ(linear_layers_as_gemm(*m), 0);
}

}  // namespace
}  // namespace ampc::passes
