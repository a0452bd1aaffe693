// read_expands_as_broadcasts (passes/broadcast_expands.h): the readers of an Expand that
// broadcast their operands themselves read its input, where their outputs keep their shapes;
// an Expand left unread goes. Left as they are: a reader that would lose its shape (a unary op,
// a sum of two expansions of small tensors), a graph output's Expand (its readers rewritten),
// an opset before 7 (broadcast by attributes), a variadic Sum before opset 8, PRelu's X. The
// compiled plan computes the sums and products element by element as the test writes them out
// (float32 and bfloat16), and autodiff's gradient of a GlobalAveragePool or a ReduceMean against
// PyTorch: the zoo's squeeze-excite and attention models (tests/zoo).
#include "passes/broadcast_expands.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/half.h"
#include "driver/pipeline.h"
#include "ir/tensor.h"
#include "runtime/cpu/executor.h"
#include "tests/support/float_values.h"

namespace ampc::passes {
namespace {

using test::from_float;
using test::to_float;

const std::vector<int64_t> kFull = {2, 3, 4, 5};
const std::vector<int64_t> kSmall = {2, 3, 1, 1};  // a squeeze-excite gradient's shape

// x [2,3,4,5], s [2,3,1,1]; e = Expand(s, [2,3,4,5]); sum = x + e, product = e * x.
struct Expanded {
  std::unique_ptr<ir::Model> model = std::make_unique<ir::Model>();
  ir::Value *x = nullptr, *s = nullptr, *e = nullptr;

  explicit Expanded(DType t = DType::kFloat32, int64_t opset = 17) {
    model->opsets.push_back({"", opset});
    model->graph->name = "expanded";
    ir::Graph& g = *model->graph;
    x = input("x", t, kFull);
    s = input("s", t, kSmall);
    e = g.add_value("e", {t, kFull});
    g.add_node("Expand", {s, shape_constant()}, {e}, "expand");
    binary("Add", x, e, "sum");
    binary("Mul", e, x, "product");
  }

  ir::Value* input(const std::string& name, DType t, const std::vector<int64_t>& shape) {
    ir::Value* v = model->graph->add_value(name, {t, shape});
    v->is_graph_input = true;
    model->graph->inputs.push_back(v);
    return v;
  }

  ir::Value* shape_constant() {
    ir::Tensor c;
    c.name = "shape";
    c.dtype = DType::kInt64;
    c.dims = {static_cast<int64_t>(kFull.size())};
    c.bytes.resize(kFull.size() * sizeof(int64_t));
    std::memcpy(c.bytes.data(), kFull.data(), c.bytes.size());
    ir::Value* v = model->graph->add_value("shape", {DType::kInt64, c.dims});
    v->initializer = std::make_unique<ir::Tensor>(std::move(c));
    model->graph->initializers.push_back(v);
    return v;
  }

  ir::Value* binary(const std::string& op, ir::Value* a, ir::Value* b, const std::string& name) {
    const std::vector<int64_t> shape =
        *a->type.shape == kSmall && *b->type.shape == kSmall ? kSmall : kFull;
    ir::Value* y = model->graph->add_value(name, {a->type.dtype, shape});
    model->graph->add_node(op, {a, b}, {y}, name + "_node");
    model->graph->outputs.push_back(y);
    return y;
  }

  const ir::Node* producer(const std::string& name) const {
    return model->graph->find_value(name)->producer;
  }
  bool has_expand() const {
    for (const auto& n : model->graph->nodes) {
      if (n->op_type == "Expand") return true;
    }
    return false;
  }
};

TEST(ReadExpandsAsBroadcasts, BroadcastingReadersReadTheSmallTensor) {
  Expanded m;
  EXPECT_EQ(read_expands_as_broadcasts(*m.model), 2);
  EXPECT_EQ(m.producer("sum")->inputs[1], m.s);
  EXPECT_EQ(m.producer("product")->inputs[0], m.s);
  EXPECT_FALSE(m.has_expand());
  EXPECT_EQ(*m.model->graph->find_value("sum")->type.shape, kFull);
}

TEST(ReadExpandsAsBroadcasts, LeavesReadersThatWouldLoseTheirShape) {
  {  // a unary op: its output is its operand's shape
    Expanded m;
    ir::Value* r = m.model->graph->add_value("relu", m.e->type);
    m.model->graph->add_node("Relu", {m.e}, {r}, "relu_node");
    m.model->graph->outputs.push_back(r);
    EXPECT_EQ(read_expands_as_broadcasts(*m.model), 2);
    EXPECT_EQ(m.producer("relu")->inputs[0], m.e);
    EXPECT_TRUE(m.has_expand());
  }
  {  // e + e: one operand may be small, not both
    Expanded m;
    m.binary("Sub", m.e, m.e, "twice");
    EXPECT_EQ(read_expands_as_broadcasts(*m.model), 3);
    const ir::Node* n = m.producer("twice");
    EXPECT_EQ(n->inputs[0], m.s);
    EXPECT_EQ(n->inputs[1], m.e);
  }
  {  // the Expand's output is a graph output: its readers change, the node stays
    Expanded m;
    m.model->graph->outputs.push_back(m.e);
    EXPECT_EQ(read_expands_as_broadcasts(*m.model), 2);
    EXPECT_TRUE(m.has_expand());
  }
  {  // opset 6: Add broadcasts by its attributes, not numpy's way
    Expanded m(DType::kFloat32, 6);
    EXPECT_EQ(read_expands_as_broadcasts(*m.model), 0);
    EXPECT_TRUE(m.has_expand());
  }
  {  // opset 7: Sum takes operands of one shape (numpy broadcasting from opset 8)
    Expanded m(DType::kFloat32, 7);
    m.binary("Sum", m.x, m.e, "variadic");
    EXPECT_EQ(read_expands_as_broadcasts(*m.model), 2);
    EXPECT_EQ(m.producer("variadic")->inputs[1], m.e);
  }
  {  // PRelu broadcasts its slope to X, not X to its slope
    Expanded m;
    m.binary("PRelu", m.e, m.x, "x_expanded");
    m.binary("PRelu", m.x, m.e, "slope_expanded");
    EXPECT_EQ(read_expands_as_broadcasts(*m.model), 3);
    EXPECT_EQ(m.producer("x_expanded")->inputs[0], m.e);
    EXPECT_EQ(m.producer("slope_expanded")->inputs[1], m.s);
  }
}

// The compiled CPU plan (the pass runs in every pipeline: no Expand step is left): each element
// of the sum and the product from x's element and its channel's s, rounded once to T.
template <typename T>
void check_plan(DType t) {
  Expanded m(t);
  compiler::CompileOptions o;
  o.lowering.target = "cpu";
  plan::Plan compiled = compiler::compile_model(*m.model, o, "expanded");
  for (const plan::Step& step : compiled.steps()) EXPECT_NE(step.op(), "Expand");
  rt::cpu::Executor exec(std::move(compiled));
  rt::Tensor x(t, kFull), s(t, kSmall);
  for (int64_t j = 0; j < x.numel(); ++j) {
    x.data<T>()[j] = from_float<T>(static_cast<float>(j % 17) * 0.375f - 3.0f);
  }
  for (int64_t j = 0; j < s.numel(); ++j) {
    s.data<T>()[j] = from_float<T>(static_cast<float>(j) * 1.25f - 2.5f);
  }
  auto out = exec.run({{"x", x}, {"s", s}});
  const int64_t plane = kFull[2] * kFull[3];
  for (int64_t j = 0; j < x.numel(); ++j) {
    const double xv = to_float(x.data<T>()[j]), sv = to_float(s.data<T>()[j / plane]);
    const auto rounded = [](double v) { return to_float(from_float<T>(static_cast<float>(v))); };
    EXPECT_EQ(to_float(out.at("sum").data<T>()[j]), rounded(xv + sv)) << j;
    EXPECT_EQ(to_float(out.at("product").data<T>()[j]), rounded(xv * sv)) << j;
  }
}

TEST(ReadExpandsAsBroadcasts, CompiledPlanBroadcastsEachChannel) {
  check_plan<float>(DType::kFloat32);
  check_plan<BFloat16>(DType::kBFloat16);
}

}  // namespace
}  // namespace ampc::passes
