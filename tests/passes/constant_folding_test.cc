// Constant folding evaluates nodes over constants through the CPU backend's operators, but
// never over values that change: a training-state counter (`counter + 1`) or an initializer
// that is also a graph input. Folding those would freeze the counter at its initial value.
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

// An initializer of `dtype` (int64 or float32) and `dims` holding `v`.
ir::Value* tensor(ir::Graph& g, const std::string& name, DType dtype, std::vector<int64_t> dims,
                  const std::vector<double>& v) {
  ir::Value* value = g.add_value(name, {dtype, dims});
  auto t = std::make_unique<ir::Tensor>();
  t->name = name;
  t->dtype = dtype;
  t->dims = std::move(dims);
  for (size_t k = 0; k < v.size(); ++k) {
    if (dtype == DType::kInt64) {
      const auto x = static_cast<int64_t>(v[k]);
      t->bytes.insert(t->bytes.end(), reinterpret_cast<const uint8_t*>(&x),
                      reinterpret_cast<const uint8_t*>(&x) + 8);
    } else {
      const auto x = static_cast<float>(v[k]);
      t->bytes.insert(t->bytes.end(), reinterpret_cast<const uint8_t*>(&x),
                      reinterpret_cast<const uint8_t*>(&x) + 4);
    }
  }
  value->initializer = std::move(t);
  g.initializers.push_back(value);
  return value;
}

std::vector<int64_t> int64s(const ir::Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
  return out;
}

// One node of the default domain at opset 17 over `inputs`, its output the graph's output.
struct OneNode {
  ir::Model m;
  ir::Value* out = nullptr;
  ir::Node* node = nullptr;
  OneNode() {
    m.ir_version = 8;
    m.opsets.push_back({"", 17});
  }
  ir::Graph& g() { return *m.graph; }
  void add(const std::string& op, std::vector<ir::Value*> inputs, DType out_dtype) {
    out = g().add_value("out", {out_dtype, std::nullopt});
    node = g().add_node(op, std::move(inputs), {out}, op);
    g().outputs.push_back(out);
  }
  // The folded value of `out`, or an empty tensor when the node stayed.
  ir::Tensor fold() {
    fold_constants(m);
    return out->initializer ? *out->initializer : ir::Tensor{};
  }
};

// Folding runs nodes through the CPU backend's operators, so ops beyond shape arithmetic
// fold too. Expected values worked out by hand.
TEST(ConstantFolding, FoldsAnIntegerReduceProd) {
  OneNode f;
  ir::Value* x = tensor(f.g(), "x", DType::kInt64, {2, 3}, {1, 2, 3, 4, 5, 6});
  f.add("ReduceProd", {x}, DType::kInt64);
  f.node->attributes.push_back(ir::Attribute::make_ints("axes", {1}));
  f.node->attributes.push_back(ir::Attribute::make_int("keepdims", 0));
  const ir::Tensor t = f.fold();
  EXPECT_EQ(t.dims, (std::vector<int64_t>{2}));
  EXPECT_EQ(int64s(t), (std::vector<int64_t>{1 * 2 * 3, 4 * 5 * 6}));
  EXPECT_TRUE(f.g().nodes.empty());
}

TEST(ConstantFolding, FoldsAnInt64GatherOnAxisOne) {
  OneNode f;
  ir::Value* x = tensor(f.g(), "x", DType::kInt64, {2, 3}, {10, 11, 12, 20, 21, 22});
  ir::Value* idx = tensor(f.g(), "idx", DType::kInt64, {2}, {2, -3});
  f.add("Gather", {x, idx}, DType::kInt64);
  f.node->attributes.push_back(ir::Attribute::make_int("axis", 1));
  const ir::Tensor t = f.fold();
  EXPECT_EQ(t.dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(int64s(t), (std::vector<int64_t>{12, 10, 22, 20}));
}

TEST(ConstantFolding, FoldsASliceWithANegativeStep) {
  OneNode f;
  ir::Value* x = tensor(f.g(), "x", DType::kInt64, {10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  ir::Value* starts = ints(f.g(), "starts", {-2});  // 8
  ir::Value* ends = ints(f.g(), "ends", {0});
  ir::Value* axes = ints(f.g(), "axes", {0});
  ir::Value* steps = ints(f.g(), "steps", {-3});
  f.add("Slice", {x, starts, ends, axes, steps}, DType::kInt64);
  const ir::Tensor t = f.fold();
  EXPECT_EQ(int64s(t), (std::vector<int64_t>{8, 5, 2}));
}

// An op the CPU backend rejects stays in the graph, for the backend to report when it runs.
TEST(ConstantFolding, LeavesAFailingOpUnfolded) {
  OneNode f;
  ir::Value* x = tensor(f.g(), "x", DType::kInt64, {3}, {1, 2, 3});
  ir::Value* idx = tensor(f.g(), "idx", DType::kInt64, {1}, {3});  // out of range
  f.add("Gather", {x, idx}, DType::kInt64);
  EXPECT_EQ(fold_constants(f.m), 0);
  ASSERT_EQ(f.g().nodes.size(), 1u);
  EXPECT_EQ(f.g().nodes[0]->op_type, "Gather");
  EXPECT_FALSE(f.out->initializer);
}

// Integer division by zero is left to the backend that runs it.
TEST(ConstantFolding, LeavesAnIntegerDivisionByZero) {
  OneNode f;
  ir::Value* a = tensor(f.g(), "a", DType::kInt64, {2}, {6, 7});
  ir::Value* b = tensor(f.g(), "b", DType::kInt64, {2}, {3, 0});
  f.add("Div", {a, b}, DType::kInt64);
  EXPECT_EQ(fold_constants(f.m), 0);
}

// Float math folds only where every backend computes the same bits: a correctly rounded op on
// a tiny tensor that no parameter feeds.
TEST(ConstantFolding, FoldsOnlyExactFloatMathOnTinyConstants) {
  auto folds = [](const std::string& op, int64_t n, bool parameter) {
    OneNode f;
    std::vector<double> v(static_cast<size_t>(n), 0.5);
    ir::Value* a = tensor(f.g(), "a", DType::kFloat32, {n}, v);
    a->from_model = parameter;
    ir::Value* b = tensor(f.g(), "b", DType::kFloat32, {n}, v);
    if (op == "Exp")
      f.add(op, {a}, DType::kFloat32);
    else
      f.add(op, {a, b}, DType::kFloat32);
    return fold_constants(f.m) == 1;
  };
  EXPECT_TRUE(folds("Mul", 4, false));
  EXPECT_FALSE(folds("Mul", 4, true));    // a model's float initializer: a parameter
  EXPECT_FALSE(folds("Mul", 17, false));  // more than tiny
  EXPECT_FALSE(folds("Exp", 4, false));   // rounds as each backend's exp does
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

// A Loop's output shape is decided in its body at run time: the error says it is control
// flow, and what to write instead for the layer torch exports this way.
TEST(StaticShapes, NamesControlFlowAsTheReason) {
  ir::Model m;
  m.opsets.push_back({"", 17});
  ir::Graph& g = *m.graph;
  ir::Value* count = int_initializer(g, "count", 3);
  g.outputs = {node(g, "Loop", {count}, {DType::kFloat32, std::nullopt})};
  try {
    require_static_shapes(g, "differentiation needs static shapes");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("output of node 'Loop_0' (Loop), is unknown: control "
                                         "flow (Loop) is not supported for training"),
              std::string::npos)
        << e.what();
  }
}

// torch's F.one_hot writes OneHot with a constant depth, whose size ONNX's inference leaves
// unknown: the depth gives it, and what reads the one-hot tensor learns its shape too.
TEST(StaticShapes, OneHotTakesItsConstantDepth) {
  ir::Model m;
  m.ir_version = 8;
  m.opsets.push_back({"", 17});
  ir::Graph& g = *m.graph;
  ir::Value* idx = g.add_value("idx", {DType::kInt64, std::vector<int64_t>{2, 3}});
  idx->is_graph_input = true;
  g.inputs.push_back(idx);
  ir::Value* hot =
      node(g, "OneHot", {idx, int_initializer(g, "depth", 5), ints(g, "values", {0, 1})},
           {DType::kInt64, std::nullopt});
  g.nodes.back()->attributes.push_back(ir::Attribute::make_int("axis", 1));
  ir::Value* f = node(g, "Cast", {hot}, {DType::kFloat32, std::nullopt});
  g.nodes.back()->attributes.push_back(
      ir::Attribute::make_int("to", static_cast<int64_t>(DType::kFloat32)));
  g.outputs = {f};
  fold_static_shapes(m);
  EXPECT_EQ(hot->type.str(), "i64[2,5,3]");
  EXPECT_EQ(f->type.str(), "f32[2,5,3]");
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
