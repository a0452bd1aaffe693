// inline_constant_ifs (passes/inline_constant_if.h) on hand-built graphs: an If with a constant
// condition becomes the branch it takes (its nodes and initializers copied, the outer values it
// reads read as they are, the If's output value kept), the graph verifies (no use is left from
// the destroyed branches), and an If with a computed condition stays. The values and
// gradients through such an If are checked against PyTorch float64 by the local_response_norm
// model of tests/oracle/model_oracle.py.
#include "passes/inline_constant_if.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "ir/verifier.h"
#include "passes/autodiff/autodiff.h"
#include "tests/support/empty_model.h"

namespace ampc::passes {
namespace {

using Shape = std::vector<int64_t>;

struct Graph {
  std::unique_ptr<ir::Model> model = test::empty_model();
  ir::Graph& g = *model->graph;
  ir::Value* x = [this] {
    ir::Value* v = g.add_value("x", {DType::kFloat32, Shape{2, 3}});
    v->is_graph_input = true;
    g.inputs.push_back(v);
    return v;
  }();

  // A branch reading the outer x: Mul(x, 2) with its own initializer, or Neg(x).
  std::unique_ptr<ir::Graph> branch(bool multiply) {
    auto b = std::make_unique<ir::Graph>();
    b->parent = &g;
    b->name = multiply ? "then" : "else";
    ir::Value* out = b->add_value(multiply ? "doubled" : "negated", x->type);
    if (multiply) {
      ir::Value* two = b->add_value("two", {DType::kFloat32, Shape{}});
      two->initializer = std::make_unique<ir::Tensor>(
          ir::tensor_of<float>(DType::kFloat32, DType::kFloat64, {}, std::vector<double>{2.0}));
      two->initializer->name = "two";
      b->initializers.push_back(two);
      b->add_node("Mul", {x, two}, {out}, "double");
    } else {
      b->add_node("Neg", {x}, {out}, "negate");
    }
    b->outputs.push_back(out);
    return b;
  }

  // y = If(cond) then Mul(x, 2) else Neg(x); a graph output.
  ir::Value* add_if(ir::Value* cond) {
    ir::Value* y = g.add_value("y", x->type);
    ir::Node* n = g.add_node("If", {cond}, {y}, "choose");
    ir::Attribute then_branch, else_branch;
    then_branch.name = "then_branch";
    then_branch.kind = ir::AttrKind::kGraph;
    then_branch.g = branch(true);
    else_branch.name = "else_branch";
    else_branch.kind = ir::AttrKind::kGraph;
    else_branch.g = branch(false);
    n->attributes.push_back(std::move(then_branch));
    n->attributes.push_back(std::move(else_branch));
    g.outputs.push_back(y);
    return y;
  }

  ir::Value* constant_condition(bool value) {
    ir::Value* c = g.add_value("cond", {DType::kBool, Shape{}});
    c->initializer = std::make_unique<ir::Tensor>();
    c->initializer->name = "cond";
    c->initializer->dtype = DType::kBool;
    c->initializer->bytes = {static_cast<uint8_t>(value)};
    g.initializers.push_back(c);
    return c;
  }

  std::map<std::string, int> ops() const {
    std::map<std::string, int> count;
    for (const auto& n : g.nodes) ++count[n->op_type];
    return count;
  }
};

TEST(InlineConstantIf, TheTakenBranchReplacesTheIf) {
  for (bool taken : {true, false}) {
    SCOPED_TRACE(taken ? "then" : "else");
    Graph t;
    ir::Value* y = t.add_if(t.constant_condition(taken));
    EXPECT_EQ(inline_constant_ifs(*t.model), 1);
    ir::verify(*t.model);
    const auto ops = t.ops();
    EXPECT_EQ(ops.count("If"), 0u);
    EXPECT_EQ(ops.count(taken ? "Mul" : "Neg"), 1u);
    EXPECT_EQ(ops.count(taken ? "Neg" : "Mul"), 0u);
    // The If's output value stays the graph's output, written by the branch's result.
    ASSERT_EQ(t.g.outputs.size(), 1u);
    EXPECT_EQ(t.g.outputs[0], y);
    ASSERT_NE(y->producer, nullptr);
    const ir::Node* result = y->producer->inputs[0]->producer;
    ASSERT_NE(result, nullptr);
    EXPECT_EQ(result->op_type, taken ? "Mul" : "Neg");
    EXPECT_EQ(result->inputs[0], t.x);  // the outer value, read as it is
    // x is read by the copied node alone: the destroyed branches left no use behind.
    ASSERT_EQ(t.x->uses.size(), 1u);
    EXPECT_EQ(t.x->uses[0].node, result);
    if (taken) {
      const ir::Value* two = result->inputs[1];
      ASSERT_TRUE(two->is_initializer());
      EXPECT_EQ(two->owner, &t.g);
      EXPECT_EQ(ir::load_element<float>(two->initializer->bytes.data(), 0), 2.0f);
    }
  }
}

TEST(InlineConstantIf, AComputedConditionStays) {
  Graph t;
  ir::Value* cond = t.g.add_value("cond", {DType::kBool, Shape{}});
  cond->is_graph_input = true;
  t.g.inputs.push_back(cond);
  t.add_if(cond);
  EXPECT_EQ(inline_constant_ifs(*t.model), 0);
  ir::verify(*t.model);
  EXPECT_EQ(t.ops().count("If"), 1u);
}

// An If whose computed condition stays, with branches that read a parameter: the loss depends
// on it only inside the subgraphs, which autodiff does not differentiate. The refusal names
// the If and control flow (it said "does not depend on any trainable parameter" before:
// torch's .diagonal() of an einsum left such an If until the einsum's shape folded).
TEST(InlineConstantIf, ParametersReadOnlyInsideAStayingIfAreRefusedByName) {
  Graph t;
  t.x->is_graph_input = false;  // x becomes a parameter
  t.g.inputs.clear();
  t.x->initializer = std::make_unique<ir::Tensor>(
      ir::tensor_of<float>(DType::kFloat32, DType::kFloat64, {2, 3}, std::vector<double>(6, 0.5)));
  t.x->initializer->name = "x";
  t.x->from_model = true;
  t.g.initializers.push_back(t.x);
  ir::Value* cond = t.g.add_value("cond", {DType::kBool, Shape{}});
  cond->is_graph_input = true;
  t.g.inputs.push_back(cond);
  ir::Value* y = t.add_if(cond);
  ir::Value* loss = t.g.add_value("loss", {DType::kFloat32, Shape{}});
  t.g.add_node("ReduceSum", {y}, {loss}, "sum")
      ->attributes.push_back(ir::Attribute::make_int("keepdims", 0));
  t.g.outputs = {loss};
  try {
    differentiate(*t.model, {.loss = "loss", .freeze = {}});
    ADD_FAILURE() << "differentiated through an If";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'choose' (If)"), std::string::npos) << what;
    EXPECT_NE(what.find("control flow"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace ampc::passes
