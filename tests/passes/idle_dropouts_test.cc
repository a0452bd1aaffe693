// remove_idle_dropouts (passes/idle_dropouts.h): a Dropout whose ratio is a constant 0 or
// whose training_mode is omitted or a constant false (and any Dropout before opset 12) is
// bypassed: its reader reads its input. Left as they are: a positive or omitted ratio in
// training mode, a ratio or mode the caller may feed (a graph input), a mask that is read, an
// output kept after the step. Trained against PyTorch: the zoo's transformers (tests/zoo),
// exported in training mode with dropout 0.
#include "passes/idle_dropouts.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "ir/tensor.h"
#include "runtime/cpu/executor.h"

namespace ampc::passes {
namespace {

// x [4] -> Dropout(x, ratio, training_mode) -> y -> Relu -> z, the graph output.
struct Dropped {
  std::unique_ptr<ir::Model> model = std::make_unique<ir::Model>();
  ir::Value* x = nullptr;
  ir::Node* dropout = nullptr;
  ir::Node* relu = nullptr;

  // ratio < 0: omitted; mode < 0: omitted, else a bool constant.
  Dropped(double ratio, int mode, int64_t opset = 17) {
    model->opsets.push_back({"", opset});
    model->graph->name = "dropped";
    ir::Graph& g = *model->graph;
    x = g.add_value("x", {DType::kFloat32, std::vector<int64_t>{4}});
    x->is_graph_input = true;
    g.inputs.push_back(x);
    std::vector<ir::Value*> inputs = {x};
    if (opset >= 12) {
      if (ratio >= 0 || mode >= 0) {
        const float r = static_cast<float>(ratio);
        inputs.push_back(ratio >= 0 ? constant("ratio", DType::kFloat32, &r, sizeof r) : nullptr);
      }
      if (mode >= 0) {
        const bool m = mode != 0;
        inputs.push_back(constant("mode", DType::kBool, &m, sizeof m));
      }
    }
    ir::Value* y = g.add_value("y", x->type);
    ir::Value* mask = g.add_value("mask", {DType::kBool, std::vector<int64_t>{4}});
    dropout = g.add_node("Dropout", inputs, {y, mask}, "dropout");
    if (opset < 12 && ratio >= 0)
      dropout->attributes.push_back(ir::Attribute::make_float("ratio", static_cast<float>(ratio)));
    ir::Value* z = g.add_value("z", x->type);
    relu = g.add_node("Relu", {y}, {z}, "relu");
    g.outputs.push_back(z);
  }

  ir::Value* constant(const std::string& name, DType t, const void* data, size_t bytes) {
    ir::Tensor c;
    c.name = name;
    c.dtype = t;
    c.bytes.resize(bytes);
    std::memcpy(c.bytes.data(), data, bytes);
    ir::Value* v = model->graph->add_value(name, {t, std::vector<int64_t>{}});
    v->initializer = std::make_unique<ir::Tensor>(std::move(c));
    model->graph->initializers.push_back(v);
    return v;
  }

  bool bypassed() const {
    bool any_dropout = false;
    for (const auto& n : model->graph->nodes) any_dropout |= n->op_type == "Dropout";
    return !any_dropout && relu->inputs[0] == x;
  }
};

TEST(RemoveIdleDropouts, RatioZeroInTrainingModeIsBypassed) {
  Dropped d(0.0, 1);
  EXPECT_EQ(remove_idle_dropouts(*d.model), 1);
  EXPECT_TRUE(d.bypassed());
}

TEST(RemoveIdleDropouts, InferenceModeIsBypassed) {
  Dropped off(0.1, 0);  // training_mode false
  EXPECT_EQ(remove_idle_dropouts(*off.model), 1);
  EXPECT_TRUE(off.bypassed());
  Dropped omitted(0.1, -1);  // training_mode omitted: inference
  EXPECT_EQ(remove_idle_dropouts(*omitted.model), 1);
  EXPECT_TRUE(omitted.bypassed());
  Dropped old(0.5, -1, 10);  // before opset 12 there is no training mode
  EXPECT_EQ(remove_idle_dropouts(*old.model), 1);
  EXPECT_TRUE(old.bypassed());
}

TEST(RemoveIdleDropouts, DropoutsThatMayDropStay) {
  {  // a positive ratio in training mode
    Dropped d(0.1, 1);
    EXPECT_EQ(remove_idle_dropouts(*d.model), 0);
  }
  {  // the default ratio, 0.5, in training mode
    Dropped d(-1.0, 1);
    EXPECT_EQ(remove_idle_dropouts(*d.model), 0);
  }
  {  // a ratio of 0 that the caller may feed: an initializer that is also a graph input
    Dropped d(0.0, 1);
    ir::Value* ratio = d.dropout->inputs[1];
    ratio->is_graph_input = true;
    d.model->graph->inputs.push_back(ratio);
    EXPECT_EQ(remove_idle_dropouts(*d.model), 0);
  }
  {  // a mode the caller may feed
    Dropped d(0.1, 0);
    ir::Value* mode = d.dropout->inputs[2];
    mode->is_graph_input = true;
    d.model->graph->inputs.push_back(mode);
    EXPECT_EQ(remove_idle_dropouts(*d.model), 0);
  }
}

TEST(RemoveIdleDropouts, ReadMasksAndKeptOutputsStay) {
  {  // the mask read by a node
    Dropped d(0.0, 1);
    ir::Graph& g = *d.model->graph;
    ir::Value* n = g.add_value("not_mask", {DType::kBool, std::vector<int64_t>{4}});
    g.add_node("Not", {d.dropout->outputs[1]}, {n}, "not");
    g.outputs.push_back(n);
    EXPECT_EQ(remove_idle_dropouts(*d.model), 0);
  }
  {  // the mask a graph output
    Dropped d(0.0, 1);
    d.model->graph->outputs.push_back(d.dropout->outputs[1]);
    EXPECT_EQ(remove_idle_dropouts(*d.model), 0);
  }
  {  // the output a graph output
    Dropped d(0.0, 1);
    d.model->graph->outputs.push_back(d.dropout->outputs[0]);
    EXPECT_EQ(remove_idle_dropouts(*d.model), 0);
  }
}

// The pipeline runs the pass: a compiled plan of a ratio-0 Dropout has no Dropout step, and its
// output is Relu(x).
TEST(RemoveIdleDropouts, CompiledPlanHasNoDropoutStep) {
  Dropped d(0.0, 1);
  compiler::CompileOptions o;
  o.lowering.target = "cpu";
  plan::Plan compiled = compiler::compile_model(*d.model, o, "dropped");
  for (const plan::Step& step : compiled.steps()) EXPECT_NE(step.op(), "Dropout");
  rt::cpu::Executor exec(std::move(compiled));
  rt::Tensor x(DType::kFloat32, {4});
  const float values[] = {-1.5f, 0.25f, 3.0f, -0.0f};
  std::memcpy(x.data<float>(), values, sizeof values);
  auto out = exec.run({{"x", x}});
  const rt::Tensor& z = out.at("z");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(z.data<float>()[i], values[i] > 0 ? values[i] : 0.0f);
}

}  // namespace
}  // namespace ampc::passes
