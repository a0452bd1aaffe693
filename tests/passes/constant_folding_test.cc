// Constant folding evaluates integer arithmetic over constants, but never over values that
// change: a training-state counter (`counter + 1`) or an initializer that is also a graph
// input. Folding those would freeze the counter at its initial value.
#include <gtest/gtest.h>

#include <cstring>

#include "base/error.h"
#include "passes/constant_folding.h"
#include "passes/static_shapes.h"

namespace ampc::passes {
namespace {

ir::Value* int_initializer(ir::Graph& g, const std::string& name, int64_t v) {
  ir::Value* value = g.add_value(name, {DType::kInt64, std::vector<int64_t>{}});
  value->initializer = std::make_unique<ir::Tensor>();
  value->initializer->name = name;
  value->initializer->dtype = DType::kInt64;
  value->initializer->bytes.resize(8);
  std::memcpy(value->initializer->bytes.data(), &v, 8);
  g.initializers.push_back(value);
  return value;
}

// out = a + one, with `a` as given; returns the number of nodes folded.
int fold_sum(bool a_is_state, bool a_is_input) {
  ir::Model m;
  ir::Graph& g = *m.graph;
  ir::Value* a = int_initializer(g, "a", 41);
  ir::Value* one = int_initializer(g, "one", 1);
  ir::Value* out = g.add_value("out", {DType::kInt64, std::vector<int64_t>{}});
  g.add_node("Add", {a, one}, {out}, "add");
  g.outputs.push_back(out);
  if (a_is_state) m.state_updates.push_back({a, out});
  if (a_is_input) {
    a->is_graph_input = true;
    g.inputs.push_back(a);
  }
  return fold_constants(m);
}

TEST(ConstantFolding, FoldsConstantsButNotStateOrOverridableInitializers) {
  EXPECT_EQ(fold_sum(false, false), 1);
  EXPECT_EQ(fold_sum(true, false), 0);
  EXPECT_EQ(fold_sum(false, true), 0);
}

ir::Value* ints(ir::Graph& g, const std::string& name, const std::vector<int64_t>& v) {
  ir::Value* value = g.add_value(name, {DType::kInt64, std::vector<int64_t>{(int64_t)v.size()}});
  value->initializer = std::make_unique<ir::Tensor>();
  value->initializer->name = name;
  value->initializer->dtype = DType::kInt64;
  value->initializer->dims = {static_cast<int64_t>(v.size())};
  value->initializer->bytes.resize(8 * v.size());
  std::memcpy(value->initializer->bytes.data(), v.data(), 8 * v.size());
  g.initializers.push_back(value);
  return value;
}

ir::Value* node(ir::Graph& g, const std::string& op, std::vector<ir::Value*> in,
                ir::TensorType type = {DType::kInt64, std::nullopt}) {
  ir::Value* out = g.add_value(op + std::to_string(g.nodes.size()), type);
  g.add_node(op, std::move(in), {out}, op + "_" + std::to_string(g.nodes.size()));
  return out;
}

// torch's exporter's pattern (MultiheadAttention's head split): the reshape target is
// computed from x.shape at run time: [x.shape[0], x.shape[1] / 3, -1] after Mod, Equal and
// Where checks. With x f32[2,6,4] static, every shape is known after folding: y is
// [2, 6/3, 48/(2*2)] = [2,2,12] (and a Range over x.shape[2] has 4 elements).
TEST(StaticShapes, FoldsShapeArithmeticToAFixedPoint) {
  ir::Model m;
  m.ir_version = 8;
  m.opsets.push_back({"", 17});
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x", {DType::kFloat32, std::vector<int64_t>{2, 6, 4}});
  x->is_graph_input = true;
  g.inputs.push_back(x);
  ir::Value* shape = node(g, "Shape", {x});
  ir::Value* zero = int_initializer(g, "zero", 0);
  ir::Value* one = int_initializer(g, "one", 1);
  ir::Value* three = int_initializer(g, "three", 3);
  ir::Value* d0 = node(g, "Gather", {shape, zero});
  ir::Value* d1 = node(g, "Gather", {shape, one});
  ir::Value* heads = node(g, "Div", {d1, three});
  ir::Value* rem = node(g, "Mod", {d1, three});
  ir::Value* exact = node(g, "Equal", {rem, zero}, {DType::kBool, std::nullopt});
  ir::Value* checked = node(g, "Where", {exact, heads, one});
  ir::Value* axes = ints(g, "axes", {0});
  ir::Value* target = node(g, "Concat",
                           {node(g, "Unsqueeze", {d0, axes}), node(g, "Unsqueeze", {checked, axes}),
                            ints(g, "minus_one", {-1})});
  g.nodes.back()->attributes.push_back(ir::Attribute::make_int("axis", 0));
  ir::Value* y = node(g, "Reshape", {x, target}, {DType::kFloat32, std::nullopt});
  ir::Value* z = node(g, "Relu", {y}, {DType::kFloat32, std::nullopt});
  ir::Value* d2 = node(g, "Gather", {shape, int_initializer(g, "two", 2)});
  ir::Value* r = node(g, "Range", {zero, d2, one});
  g.outputs = {z, r};
  EXPECT_GT(fold_static_shapes(m), 0);
  EXPECT_EQ(y->type.str(), "f32[2,2,12]");
  EXPECT_EQ(z->type.str(), "f32[2,2,12]");
  ASSERT_TRUE(r->initializer);
  EXPECT_EQ(r->initializer->dims, std::vector<int64_t>{4});
  EXPECT_NO_THROW(require_static_shapes(g, "test"));
}

// A reshape target that comes from data is not a constant: the error names the Reshape (the
// first node whose shape is unknown) and its input, not a consumer downstream.
TEST(StaticShapes, NamesTheFirstNodeWhoseShapeIsUnknown) {
  ir::Model m;
  m.ir_version = 8;
  m.opsets.push_back({"", 17});
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x", {DType::kFloat32, std::vector<int64_t>{2, 6}});
  ir::Value* s = g.add_value("s", {DType::kInt64, std::vector<int64_t>{2}});
  for (ir::Value* v : {x, s}) {
    v->is_graph_input = true;
    g.inputs.push_back(v);
  }
  ir::Value* y = node(g, "Reshape", {x, s}, {DType::kFloat32, std::nullopt});
  ir::Value* z = node(g, "Relu", {node(g, "Relu", {y}, {DType::kFloat32, std::nullopt})},
                      {DType::kFloat32, std::nullopt});
  g.outputs = {z};
  fold_static_shapes(m);
  try {
    require_static_shapes(g, "differentiation needs static shapes");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("node 'Reshape_0' (Reshape)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("input 1 's' is computed at run time"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace ampc::passes
