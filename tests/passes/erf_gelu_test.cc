// torch's GELU as its exporter writes it (passes/erf_gelu.h): which chains are found, and how
// autocast runs one whose input is 16-bit (in fp32, the result rounded once, as PyTorch's
// gelu). That this rounds as PyTorch does is checked against PyTorch by
// tests/oracle/gelu_rounding_oracle.py.
#include "passes/erf_gelu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "driver/pipeline.h"
#include "ir/verifier.h"
#include "passes/autocast.h"

namespace ampc::passes {
namespace {

const std::vector<int64_t> kShape = {4, 8};

ir::Value* initializer(ir::Graph& g, const std::string& name, std::vector<int64_t> dims,
                       double value, bool from_model) {
  const size_t n = dims.empty() ? 1 : static_cast<size_t>(dims[0] * dims[1]);
  ir::Tensor t =
      ir::tensor_of<float>(DType::kFloat32, DType::kFloat64, dims, std::vector<double>(n, value));
  t.name = name;
  ir::Value* v = g.add_value(name, {DType::kFloat32, dims});
  v->initializer = std::make_unique<ir::Tensor>(std::move(t));
  v->from_model = from_model;
  g.initializers.push_back(v);
  return v;
}

ir::Value* constant(ir::Graph& g, const std::string& name, double value) {
  return initializer(g, name, {}, value, false);
}

// How the chain is written; the default is torch 1.13's exporter's form.
struct Form {
  bool inverse_scale = false;     // Mul(x, 1/sqrt(2)) in place of Div(x, sqrt(2))
  bool constants_first = false;   // Mul(1/sqrt(2), x), Add(1, e), Mul(a, x), Mul(0.5, m)
  double sqrt2 = std::sqrt(2.0);  // the divisor
  bool erf_is_output = false;     // Erf's result is also a graph output
  bool other_x = false;           // the product is with another value than the Div's input
  bool residual = false;          // fc2 reads Add(GELU(h), h), a FOLLOW op, not the GELU
};

// y = MatMul(h, W2) with h = GELU(MatMul(x, W1)) in fp32: the GELU's input and its result
// read by GEMMs, as in a transformer's MLP block.
std::unique_ptr<ir::Model> mlp_block(const Form& f = {}) {
  auto m = std::make_unique<ir::Model>();
  m->opsets.push_back({"", 17});
  m->graph->name = "g";
  ir::Graph& g = *m->graph;
  const ir::TensorType t{DType::kFloat32, kShape};
  auto value = [&](const std::string& name) { return g.add_value(name, t); };
  auto binary = [&](const char* op, ir::Value* a, ir::Value* b, const std::string& out, bool swap) {
    ir::Value* r = value(out);
    g.add_node(op, swap ? std::vector<ir::Value*>{b, a} : std::vector<ir::Value*>{a, b}, {r}, out);
    return r;
  };
  ir::Value* x = value("x");
  g.inputs.push_back(x);
  ir::Value* h = value("h");
  g.add_node("MatMul", {x, initializer(g, "w1", {8, 8}, 0.25, true)}, {h}, "fc1");
  ir::Value* scaled =
      f.inverse_scale
          ? binary("Mul", h, constant(g, "c_scale", 1 / f.sqrt2), "gelu/div", f.constants_first)
          : binary("Div", h, constant(g, "c_scale", f.sqrt2), "gelu/div", false);
  ir::Value* e = value("gelu/erf");
  g.add_node("Erf", {scaled}, {e}, "gelu/erf");
  ir::Value* a = binary("Add", e, constant(g, "c_one", 1.0), "gelu/add", f.constants_first);
  ir::Value* times = f.other_x ? x : h;
  ir::Value* p = binary("Mul", times, a, "gelu/mul", f.constants_first);
  ir::Value* y = binary("Mul", p, constant(g, "c_half", 0.5), "gelu/mul_1", f.constants_first);
  if (f.residual) y = binary("Add", y, h, "residual", false);
  ir::Value* out = value("out");
  g.add_node("MatMul", {y, initializer(g, "w2", {8, 8}, 0.5, true)}, {out}, "fc2");
  g.outputs.push_back(out);
  if (f.erf_is_output) g.outputs.push_back(e);
  return m;
}

const ir::Node* node(const ir::Graph& g, const std::string& name) {
  for (const auto& n : g.nodes) {
    if (n->name == name) return n.get();
  }
  return nullptr;
}

TEST(ErfGelu, FindsTheExportersChain) {
  auto m = mlp_block();
  const auto found = find_erf_gelus(*m->graph);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].x->name, "h");
  ASSERT_EQ(found[0].nodes.size(), 5u);
  EXPECT_EQ(found[0].nodes[0]->name, "gelu/div");
  EXPECT_EQ(found[0].last()->name, "gelu/mul_1");
}

TEST(ErfGelu, FindsTheOtherWritings) {
  EXPECT_EQ(find_erf_gelus(*mlp_block({.inverse_scale = true})->graph).size(), 1u);
  const auto scaled_first_model = mlp_block({.inverse_scale = true, .constants_first = true});
  const auto scaled_first = find_erf_gelus(*scaled_first_model->graph);
  ASSERT_EQ(scaled_first.size(), 1u);
  EXPECT_EQ(scaled_first[0].x->name, "h");
  EXPECT_EQ(find_erf_gelus(*mlp_block({.constants_first = true})->graph).size(), 1u);
  // sqrt(2) rounded to fp32, as the exporter writes it.
  EXPECT_EQ(find_erf_gelus(*mlp_block({.sqrt2 = double(float(std::sqrt(2.0)))})->graph).size(), 1u);
}

TEST(ErfGelu, LeavesWhatIsNotTheGelu) {
  EXPECT_TRUE(find_erf_gelus(*mlp_block({.sqrt2 = 1.5})->graph).empty());
  EXPECT_TRUE(find_erf_gelus(*mlp_block({.erf_is_output = true})->graph).empty());
  EXPECT_TRUE(find_erf_gelus(*mlp_block({.other_x = true})->graph).empty());
}

AutocastReport autocast(ir::Model& m, Precision p, std::vector<std::string> deny = {}) {
  AutocastOptions o;
  o.precision = p;
  o.deny = std::move(deny);
  return apply_autocast(m, o);
}

std::string rule_of(const AutocastReport& r, const std::string& node_name) {
  for (const auto& d : r.nodes) {
    if (d.node.find(node_name) != std::string::npos) return d.rule;
  }
  return {};
}

TEST(ErfGelu, AutocastRunsItInFp32AndRoundsItsResultOnce) {
  for (Precision p : {Precision::kBF16, Precision::kFP16}) {
    auto m = mlp_block();
    const AutocastReport report = autocast(*m, p);
    ir::verify(*m);
    const DType low = precision_dtype(p);
    const ir::Graph& g = *m->graph;
    for (const char* n : {"gelu/div", "gelu/erf", "gelu/add", "gelu/mul", "gelu/mul_1"}) {
      const ir::Node* gelu_node = node(g, n);
      ASSERT_NE(gelu_node, nullptr) << n;
      EXPECT_EQ(gelu_node->outputs[0]->type.dtype, DType::kFloat32) << n;
      EXPECT_NE(rule_of(report, n).find("torch's gelu"), std::string::npos) << n;
    }
    // Both reads of the GEMM's 16-bit result go through one Cast up.
    const ir::Value* x32 = node(g, "gelu/div")->inputs[0];
    ASSERT_NE(x32->producer, nullptr);
    EXPECT_EQ(x32->producer->op_type, "Cast");
    EXPECT_EQ(x32->producer->inputs[0]->name, "h");
    EXPECT_EQ(x32->producer->inputs[0]->type.dtype, low);
    EXPECT_EQ(node(g, "gelu/mul")->inputs[0], x32);
    // The result is rounded once, by a Cast that the next GEMM reads as it is.
    const ir::Value* y32 = node(g, "gelu/mul_1")->outputs[0];
    ASSERT_EQ(y32->uses.size(), 1u);
    const ir::Node* round = y32->uses[0].node;
    EXPECT_EQ(round->op_type, "Cast");
    EXPECT_EQ(static_cast<DType>(round->attr("to")->i), low);
    const ir::Node* fc2 = node(g, "fc2");
    EXPECT_EQ(fc2->inputs[0], round->outputs[0]);
    EXPECT_EQ(fc2->inputs[0]->type.dtype, low);
    bool reported = false;
    for (const auto& c : report.casts) reported |= c.node == round->name && c.to == low;
    EXPECT_TRUE(reported);
  }
}

// PyTorch's gelu gives a 16-bit result, so an elementwise op reading it with another 16-bit
// value computes in 16 bits, as it would after any 16-bit op.
TEST(ErfGelu, AFollowReaderSeesTheRoundedResult) {
  auto m = mlp_block({.residual = true});
  autocast(*m, Precision::kBF16);
  ir::verify(*m);
  const ir::Node* add = node(*m->graph, "residual");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->outputs[0]->type.dtype, DType::kBFloat16);
  const ir::Node* round = add->inputs[0]->producer;
  ASSERT_NE(round, nullptr);
  EXPECT_EQ(round->op_type, "Cast");
  EXPECT_EQ(round->inputs[0]->producer, node(*m->graph, "gelu/mul_1"));
  EXPECT_EQ(add->inputs[1]->name, "h");
}

TEST(ErfGelu, AnOverrideOfOneOfItsOpsLeavesTheChainToTheOverrides) {
  auto m = mlp_block();
  const AutocastReport report = autocast(*m, Precision::kBF16, {"Erf"});
  ir::verify(*m);
  const ir::Graph& g = *m->graph;
  EXPECT_EQ(node(g, "gelu/div")->outputs[0]->type.dtype, DType::kBFloat16);
  EXPECT_EQ(node(g, "gelu/erf")->outputs[0]->type.dtype, DType::kFloat32);
  EXPECT_EQ(rule_of(report, "gelu/div").find("torch's gelu"), std::string::npos);
}

// A training plan of the bundled gpt (nn.GELU in each block): the backward reads each GELU's
// 16-bit input, as PyTorch's gelu saves it, and none of the chain's fp32 results (those it
// needs are computed again in the backward: recompute_low_chains).
TEST(ErfGelu, TheBackwardReadsTheSixteenBitInputNotTheFp32Chain) {
  compiler::CompileOptions options;
  options.train = true;
  options.autocast.precision = Precision::kBF16;
  const std::string path = std::string(AMPC_SOURCE_DIR) + "/models/gpt.onnx";
  auto model = compiler::load_for_compile(path, options);
  compiler::compile_model(*model, options, "gpt");
  ASSERT_FALSE(model->low_source_chains.empty());
  const ir::Graph& g = *model->graph;
  for (const auto& chain : model->low_source_chains) {
    for (const std::string& name : chain.nodes) {
      const ir::Node* n = node(g, name);
      ASSERT_NE(n, nullptr) << name;
      for (const ir::Use& u : n->outputs[0]->uses)
        EXPECT_NE(u.node->phase, ir::Phase::kBackward)
            << name << "'s fp32 result is read by the backward's " << u.node->label();
    }
    const ir::Value* x = g.find_value(chain.source);
    ASSERT_NE(x, nullptr) << chain.source;
    EXPECT_EQ(x->type.dtype, DType::kBFloat16);
    bool read_back = false;
    for (const ir::Use& u : x->uses) read_back |= u.node->phase == ir::Phase::kBackward;
    EXPECT_TRUE(read_back) << chain.source;
  }
}

TEST(ErfGelu, Fp32IsLeftAsItIs) {
  auto m = mlp_block();
  const size_t nodes = m->graph->nodes.size();
  autocast(*m, Precision::kFP32);
  EXPECT_EQ(m->graph->nodes.size(), nodes);
}

}  // namespace
}  // namespace ampc::passes
