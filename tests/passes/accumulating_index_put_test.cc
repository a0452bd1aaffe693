// accumulate_index_puts (passes/accumulating_index_put.h) on hand-built graphs of the form
// torch.onnx.export writes for index_put_(..., accumulate=True), x + ScatterND(zeros, i, v):
// that ScatterND gets reduction "add" when its data is a ConstantOfShape of 0 (default or
// given) or a zero constant and an Add reads it; a ScatterND on other data (a slice
// assignment), on ones, with a reduction already, or whose result no Add reads is left as it
// is. That the result is PyTorch's sum over repeated indices, forward and gradient, is the
// model oracle accumulated_rows' check, against PyTorch float64.
#include "passes/accumulating_index_put.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/empty_model.h"

namespace ampc::passes {
namespace {

using Shape = std::vector<int64_t>;

struct ScatterGraph {
  std::unique_ptr<ir::Model> model = test::empty_model();
  ir::Graph& g = *model->graph;
  int count = 0;

  ir::Value* input(const std::string& name, DType dtype, Shape shape) {
    ir::Value* v = g.add_value(name, {dtype, shape});
    v->is_graph_input = true;
    g.inputs.push_back(v);
    return v;
  }

  ir::Value* constant(float value, Shape shape) {
    const std::string name = "c" + std::to_string(count++);
    ir::Value* v = g.add_value(name, {DType::kFloat32, shape});
    std::vector<double> data(static_cast<size_t>(ir::shape_numel(shape)), value);
    v->initializer = std::make_unique<ir::Tensor>(
        ir::tensor_of<float>(DType::kFloat32, DType::kFloat64, shape, data));
    v->initializer->name = name;
    g.initializers.push_back(v);
    return v;
  }

  // ConstantOfShape of [3, 6], with `value` as its attribute unless it is omitted.
  ir::Value* filled(std::optional<float> value) {
    ir::Value* shape = g.add_value("shape" + std::to_string(count), {DType::kInt64, Shape{2}});
    shape->initializer = std::make_unique<ir::Tensor>(
        ir::tensor_of<int32_t>(DType::kInt64, DType::kInt64, {2}, std::vector<int64_t>{3, 6}));
    g.initializers.push_back(shape);
    ir::Value* out = g.add_value("fill" + std::to_string(count++), {DType::kFloat32, Shape{3, 6}});
    ir::Node* n = g.add_node("ConstantOfShape", {shape}, {out}, "fill");
    if (value)
      n->attributes.push_back(ir::Attribute::make_tensor(
          "value", ir::tensor_of<float>(DType::kFloat32, DType::kFloat64, {1},
                                        std::vector<double>{*value})));
    return out;
  }

  // ScatterND(data, indices [8, 1], updates [8, 6]), read by an Add with x when `added`.
  ir::Node* scatter(ir::Value* data, bool added, const char* reduction = nullptr) {
    ir::Value* out = g.add_value("s" + std::to_string(count++), {DType::kFloat32, Shape{3, 6}});
    ir::Node* n = g.add_node("ScatterND",
                             {data, input("i" + std::to_string(count), DType::kInt64, Shape{8, 1}),
                              input("v" + std::to_string(count), DType::kFloat32, Shape{8, 6})},
                             {out}, "scatter");
    if (reduction) n->attributes.push_back(ir::Attribute::make_string("reduction", reduction));
    ir::Value* y = g.add_value("y" + std::to_string(count++), {DType::kFloat32, Shape{3, 6}});
    ir::Value* x = input("x" + std::to_string(count), DType::kFloat32, Shape{3, 6});
    g.add_node(added ? "Add" : "Mul", {x, out}, {y}, "after");
    g.outputs.push_back(y);
    return n;
  }
};

std::string reduction_of(const ir::Node* n) {
  const ir::Attribute* a = n->attr("reduction");
  return a ? a->s : "none";
}

TEST(AccumulatingIndexPut, ScatterIntoZerosReadByAnAddSums) {
  ScatterGraph s;
  ir::Node* default_zero = s.scatter(s.filled(std::nullopt), true);
  ir::Node* given_zero = s.scatter(s.filled(0.0f), true, "none");
  ir::Node* zero_constant = s.scatter(s.constant(0.0f, {3, 6}), true);
  EXPECT_EQ(accumulate_index_puts(*s.model), 3);
  for (const ir::Node* n : {default_zero, given_zero, zero_constant}) {
    EXPECT_EQ(reduction_of(n), "add");
    EXPECT_EQ(std::count_if(n->attributes.begin(), n->attributes.end(),
                            [](const ir::Attribute& a) { return a.name == "reduction"; }),
              1);
  }
}

TEST(AccumulatingIndexPut, OtherScattersAreLeftAlone) {
  ScatterGraph s;
  ir::Node* assignment = s.scatter(s.input("data", DType::kFloat32, Shape{3, 6}), true);
  ir::Node* ones = s.scatter(s.filled(1.0f), true);
  ir::Node* ones_constant = s.scatter(s.constant(1.0f, {3, 6}), true);
  ir::Node* multiplied = s.scatter(s.filled(std::nullopt), false);
  ir::Node* maximum = s.scatter(s.filled(0.0f), true, "max");
  EXPECT_EQ(accumulate_index_puts(*s.model), 0);
  for (const ir::Node* n : {assignment, ones, ones_constant, multiplied})
    EXPECT_EQ(reduction_of(n), "none");
  EXPECT_EQ(reduction_of(maximum), "max");
}

}  // namespace
}  // namespace ampc::passes
