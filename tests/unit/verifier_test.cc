// ir::verify on graphs built by hand: one well-formed model, then one broken model per rule,
// each refused with an ampc::Error whose message names the problem and the value or node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "ir/graph.h"
#include "ir/verifier.h"
#include "tests/support/empty_model.h"

namespace ampc::ir {
namespace {

using ::testing::HasSubstr;

TensorType f32(std::vector<int64_t> dims) {
  return {DType::kFloat32, std::move(dims)};
}
TensorType i64(std::vector<int64_t> dims) {
  return {DType::kInt64, std::move(dims)};
}

using test::empty_model;

Value* add_input(Graph& g, const std::string& name, TensorType type) {
  Value* v = g.add_value(name, std::move(type));
  v->is_graph_input = true;
  g.inputs.push_back(v);
  return v;
}

Value* add_initializer(Graph& g, const std::string& name, TensorType type,
                       std::vector<float> data) {
  Value* v = g.add_value(name, type);
  auto t = std::make_unique<Tensor>();
  t->name = name;
  t->dtype = type.dtype;
  t->dims = type.shape.value_or(std::vector<int64_t>{});
  t->bytes.resize(data.size() * sizeof(float));
  std::memcpy(t->bytes.data(), data.data(), t->bytes.size());
  v->initializer = std::move(t);
  g.initializers.push_back(v);
  return v;
}

// The message ir::verify throws, or "<accepted>".
std::string verify_error(const Model& m, VerifyOptions options = {}) {
  try {
    verify(m, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "<accepted>";
}

// x: f32[2,3] (input), w: f32[2,3] (initializer); s = Add(x, w) "add"; y = Relu(s) "relu";
// output y.
struct Fixture {
  std::unique_ptr<Model> model = empty_model();
  Graph& g = *model->graph;
  Value* x = add_input(g, "x", f32({2, 3}));
  Value* w = add_initializer(g, "w", f32({2, 3}), {1, 2, 3, 4, 5, 6});
  Value* s = g.add_value("s", f32({2, 3}));
  Value* y = g.add_value("y", f32({2, 3}));
  Node* add = g.add_node("Add", {x, w}, {s}, "add");
  Node* relu = g.add_node("Relu", {s}, {y}, "relu");
  Fixture() { g.outputs.push_back(y); }
};

TEST(Verifier, AcceptsAWellFormedGraph) {
  Fixture f;
  EXPECT_EQ(verify_error(*f.model), "<accepted>");
  // The links add_node wires are the ones the verifier checks.
  ASSERT_EQ(f.s->uses.size(), 1u);
  EXPECT_EQ(f.s->uses[0].node, f.relu);
  EXPECT_EQ(f.s->producer, f.add);
  EXPECT_EQ(f.y->producer_output, 0);
}

TEST(Verifier, AcceptsAnIfWhoseBranchesReadOuterValues) {
  Fixture f;
  Value* c = add_input(f.g, "c", {DType::kBool, std::vector<int64_t>{}});
  Value* out = f.g.add_value("out", f32({2, 3}));
  Node* if_node = f.g.add_node("If", {c}, {out}, "if");
  for (const char* branch : {"then_branch", "else_branch"}) {
    Attribute a;
    a.name = branch;
    a.kind = AttrKind::kGraph;
    a.g = std::make_unique<Graph>();
    a.g->name = branch;
    a.g->parent = &f.g;
    Value* r = a.g->add_value(std::string(branch) + "_y", f32({2, 3}));
    a.g->add_node("Identity", {f.y}, {r});  // reads the outer value y
    a.g->outputs.push_back(r);
    if_node->attributes.push_back(std::move(a));
  }
  f.g.outputs.push_back(out);
  EXPECT_EQ(verify_error(*f.model), "<accepted>");
}

TEST(Verifier, RefusesAUseBeforeTheDefinition) {
  auto m = empty_model();
  Graph& g = *m->graph;
  Value* x = add_input(g, "x", f32({4}));
  Value* late = g.add_value("late", f32({4}));
  Value* y = g.add_value("y", f32({4}));
  g.add_node("Relu", {late}, {y}, "early_reader");  // reads `late` before it exists
  g.add_node("Neg", {x}, {late}, "late_writer");
  g.outputs.push_back(y);
  EXPECT_EQ(verify_error(*m),
            "node 'early_reader' (Relu): input 'late' is used before it is defined");
}

TEST(Verifier, RefusesAValueThatNoNodeProducesAsNodeInput) {
  auto m = empty_model();
  Graph& g = *m->graph;
  add_input(g, "x", f32({4}));
  Value* orphan = g.add_value("orphan", f32({4}));
  Value* y = g.add_value("y", f32({4}));
  g.add_node("Relu", {orphan}, {y}, "reader");
  g.outputs.push_back(y);
  EXPECT_THAT(verify_error(*m),
              HasSubstr("node 'reader' (Relu): input 'orphan' is used before it is defined"));
}

TEST(Verifier, RefusesAValueWithTwoProducingNodes) {
  auto m = empty_model();
  Graph& g = *m->graph;
  Value* x = add_input(g, "x", f32({4}));
  Value* y = g.add_value("y", f32({4}));
  g.add_node("Relu", {x}, {y}, "first");
  g.add_node("Neg", {x}, {y}, "second");
  g.outputs.push_back(y);
  const std::string message = verify_error(*m);
  EXPECT_THAT(message, HasSubstr("'y' has two producers"));
  EXPECT_THAT(message, HasSubstr("'first' (Relu)"));
  EXPECT_THAT(message, HasSubstr("'second' (Neg)"));
}

TEST(Verifier, RefusesANodeOutputThatIsAlsoAGraphInput) {
  auto m = empty_model();
  Graph& g = *m->graph;
  Value* x = add_input(g, "x", f32({4}));
  g.add_node("Relu", {x}, {x}, "overwrite");
  g.outputs.push_back(x);
  EXPECT_THAT(verify_error(*m),
              HasSubstr("value 'x' is defined twice (again as output of node 'overwrite' (Relu))"));
}

TEST(Verifier, RefusesAnInitializerThatIsAlsoANodeOutput) {
  Fixture f;
  Value* y2 = f.w;  // a node writes the initializer
  f.g.add_node("Neg", {f.y}, {y2}, "writes_w");
  EXPECT_THAT(verify_error(*f.model),
              HasSubstr("value 'w' is defined twice (again as output of node 'writes_w' (Neg))"));
}

TEST(Verifier, RefusesAUseThatTheNodeDoesNotHave) {
  Fixture f;
  f.x->uses.push_back({f.relu, 0});  // relu's input 0 is s, not x
  EXPECT_EQ(verify_error(*f.model), "value 'x' has a use that the node does not have");
}

TEST(Verifier, RefusesAUseIndexOutOfRange) {
  Fixture f;
  f.s->uses[0].input_index = 5;
  EXPECT_EQ(verify_error(*f.model), "value 's' has a use that the node does not have");
}

TEST(Verifier, RefusesANodeInputMissingFromTheUseList) {
  Fixture f;
  f.s->uses.clear();
  EXPECT_EQ(verify_error(*f.model), "node 'relu' (Relu): input 's' does not list this use");
}

TEST(Verifier, RefusesAnOutputWhoseProducerLinkIsBroken) {
  Fixture f;
  f.s->producer = nullptr;
  EXPECT_EQ(verify_error(*f.model), "node 'add' (Add): output 's' names another producer");
  Fixture f2;
  f2.s->producer_output = 1;
  EXPECT_EQ(verify_error(*f2.model), "node 'add' (Add): output 's' names another producer");
}

TEST(Verifier, RefusesAValueOwnedByAnotherGraph) {
  Fixture f;
  Graph other;
  f.s->owner = &other;
  EXPECT_EQ(verify_error(*f.model), "value 's' is listed in a graph that does not own it");
}

TEST(Verifier, RefusesInitializerDataOfTheWrongSize) {
  Fixture f;
  f.w->initializer->bytes.resize(8);  // 2 floats for a [2,3] tensor
  EXPECT_EQ(verify_error(*f.model), "initializer 'w' has 8 bytes of data for type f32[2,3]");
}

TEST(Verifier, RefusesInitializerDataOfAnotherElementType) {
  Fixture f;
  f.w->initializer->dtype = DType::kInt32;  // same byte count, other type
  EXPECT_EQ(verify_error(*f.model),
            "initializer 'w' holds i32 data but its value is typed f32[2,3]");
}

TEST(Verifier, RefusesInitializerDataOfAnotherShape) {
  Fixture f;
  f.w->initializer->dims = {3, 2};
  EXPECT_EQ(verify_error(*f.model),
            "initializer 'w' holds data of another shape than its type f32[2,3]");
}

TEST(Verifier, RefusesAnUndefinedGraphOutput) {
  Fixture f;
  f.g.outputs.push_back(f.g.add_value("nowhere", f32({2, 3})));
  EXPECT_EQ(verify_error(*f.model), "graph output 'nowhere' is not defined");
}

TEST(Verifier, RefusesAddOfFloatAndInt64) {
  auto m = empty_model();
  Graph& g = *m->graph;
  Value* a = add_input(g, "a", f32({4}));
  Value* b = add_input(g, "b", i64({4}));
  Value* c = g.add_value("c", f32({4}));
  g.add_node("Add", {a, b}, {c}, "mixed");
  g.outputs.push_back(c);
  EXPECT_EQ(verify_error(*m),
            "node 'mixed' (Add): 'b' is tensor(int64) but 'a' is tensor(float) (both type T)");
}

TEST(Verifier, RefusesAnOutputTypeThatDisagreesWithTheInputs) {
  Fixture f;
  f.y->type.dtype = DType::kFloat16;  // Relu(f32) -> f16
  EXPECT_EQ(verify_error(*f.model),
            "node 'relu' (Relu): 'y' is tensor(float16) but 's' is tensor(float) (both type T)");
}

TEST(Verifier, RefusesAnElementTypeTheOperatorDoesNotAccept) {
  auto m = empty_model();
  Graph& g = *m->graph;
  Value* a = add_input(g, "a", {DType::kBool, std::vector<int64_t>{4}});
  Value* c = g.add_value("c", {DType::kBool, std::vector<int64_t>{4}});
  g.add_node("Relu", {a}, {c}, "relu_bool");
  g.outputs.push_back(c);
  EXPECT_EQ(verify_error(*m),
            "node 'relu_bool' (Relu): input 0 'a' has type tensor(bool), which the operator does "
            "not accept");
}

TEST(Verifier, RefusesANodeWhoseDomainHasNoOpset) {
  Fixture f;
  f.relu->domain = "ai.onnx.ml";
  EXPECT_EQ(verify_error(*f.model),
            "node 'relu' (ai.onnx.ml.Relu): the model imports no opset for its domain");
}

TEST(Verifier, RefusesANonStaticGraphInput) {
  Fixture f;
  f.x->type = f32({-1, 3});
  EXPECT_EQ(verify_error(*f.model), "graph input 'x' has a non-static shape f32[?,3]");
  // Tools that only look at a graph may allow it.
  EXPECT_EQ(verify_error(*f.model, {.require_static_inputs = false}), "<accepted>");
}

TEST(Verifier, RefusesAGraphInputOfUnknownRank) {
  Fixture f;
  f.x->type.shape.reset();
  EXPECT_EQ(verify_error(*f.model), "graph input 'x' has a non-static shape f32[*]");
}

TEST(Verifier, RefusesASubgraphThatReadsALaterOuterValue) {
  Fixture f;
  Value* c = add_input(f.g, "c", {DType::kBool, std::vector<int64_t>{}});
  Value* out = f.g.add_value("out", f32({2, 3}));
  // The If comes first; its branch reads `late`, defined by a node after it.
  Value* late = f.g.add_value("late", f32({2, 3}));
  Node* if_node = f.g.add_node("If", {c}, {out}, "if");
  f.g.add_node("Neg", {f.y}, {late}, "late_writer");
  for (const char* branch : {"then_branch", "else_branch"}) {
    Attribute a;
    a.name = branch;
    a.kind = AttrKind::kGraph;
    a.g = std::make_unique<Graph>();
    a.g->name = branch;
    a.g->parent = &f.g;
    Value* r = a.g->add_value(std::string(branch) + "_y", f32({2, 3}));
    a.g->add_node("Identity", {late}, {r}, std::string(branch) + "_id");
    a.g->outputs.push_back(r);
    if_node->attributes.push_back(std::move(a));
  }
  f.g.outputs.push_back(out);
  EXPECT_EQ(verify_error(*f.model),
            "node 'then_branch_id' (Identity): input 'late' is used before it is defined");
}

TEST(Verifier, RefusesASubgraphWithoutItsParentLink) {
  Fixture f;
  Value* c = add_input(f.g, "c", {DType::kBool, std::vector<int64_t>{}});
  Value* out = f.g.add_value("out", f32({2, 3}));
  Node* if_node = f.g.add_node("If", {c}, {out}, "if");
  Attribute a;
  a.name = "then_branch";
  a.kind = AttrKind::kGraph;
  a.g = std::make_unique<Graph>();
  a.g->name = "orphan_branch";  // parent left null
  if_node->attributes.push_back(std::move(a));
  EXPECT_EQ(verify_error(*f.model), "subgraph 'orphan_branch' does not name its enclosing graph");
}

}  // namespace
}  // namespace ampc::ir
