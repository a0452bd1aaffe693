// Dead-code elimination (passes/dead_code_elimination.h) on hand-built graphs and on
// models/cnn.onnx compiled for training:
// - nodes nobody reads go, with chains of them;
// - the ampc ops' optional outputs nobody reads are left out (a ConvGrad's dX of the image
//   input, its dB of a convolution without bias), the outputs that are read or that the graph
//   returns stay;
// - ONNX ops keep theirs: an opset-9 BatchNormalization trains because its statistics outputs
//   are there, read or not.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "ir/verifier.h"
#include "ops/schemas/ampc_schemas.h"
#include "passes/dead_code_elimination.h"

namespace ampc {
namespace {

using passes::eliminate_dead_code;

class Builder {
 public:
  explicit Builder(int64_t opset = 17) {
    ops::register_ampc_schemas();
    model.opsets = {{"", opset}, {ops::kAmpcDomain, ops::kAmpcDomainVersion}};
  }
  ir::Value* input(const std::string& name, std::vector<int64_t> shape) {
    ir::Value* v = model.graph->add_value(name, {DType::kFloat32, std::move(shape)});
    v->is_graph_input = true;
    model.graph->inputs.push_back(v);
    return v;
  }
  ir::Value* value(const std::string& name, std::vector<int64_t> shape) {
    return model.graph->add_value(name, {DType::kFloat32, std::move(shape)});
  }
  ir::Node* node(const std::string& op, std::vector<ir::Value*> in, std::vector<ir::Value*> out,
                 const std::string& domain = {}) {
    return model.graph->add_node(op, std::move(in), std::move(out), op + std::to_string(++n_),
                                 domain);
  }
  ir::Model model;

 private:
  int n_ = 0;
};

// ConvGrad(dY, X, W) of a 3x3 convolution of a [2,3,6,6] image into 4 channels.
struct ConvGradGraph {
  Builder b;
  ir::Value *dx, *dw, *db;
  ir::Node* grad;
  ConvGradGraph() {
    ir::Value* dy = b.input("dy", {2, 4, 4, 4});
    ir::Value* x = b.input("x", {2, 3, 6, 6});
    ir::Value* w = b.input("w", {4, 3, 3, 3});
    dx = b.value("dx", {2, 3, 6, 6});
    dw = b.value("dw", {4, 3, 3, 3});
    db = b.value("db", {4});
    grad = b.node("ConvGrad", {dy, x, w}, {dx, dw, db}, ops::kAmpcDomain);
    grad->attributes.push_back(ir::Attribute::make_ints("kernel_shape", {3, 3}));
  }
};

TEST(DeadCode, ConvGradLeavesOutTheGradientsNobodyReads) {
  ConvGradGraph g;
  g.b.model.graph->outputs.push_back(g.dw);
  EXPECT_EQ(eliminate_dead_code(g.b.model), 0);
  ASSERT_EQ(g.b.model.graph->nodes.size(), 1u);
  const ir::Node& n = *g.b.model.graph->nodes[0];
  ASSERT_EQ(n.outputs.size(), 3u);
  EXPECT_EQ(n.outputs[0], nullptr);
  EXPECT_EQ(n.outputs[1], g.dw);
  EXPECT_EQ(n.outputs[2], nullptr);
  EXPECT_EQ(g.b.model.graph->find_value("dx"), nullptr);
  EXPECT_EQ(g.b.model.graph->find_value("db"), nullptr);
  EXPECT_NO_THROW(ir::verify(g.b.model));
}

TEST(DeadCode, ConvGradKeepsTheGradientsThatAreReadOrReturned) {
  ConvGradGraph g;
  ir::Value* neg = g.b.value("neg", {2, 3, 6, 6});
  g.b.node("Neg", {g.dx}, {neg});
  g.b.model.graph->outputs.push_back(neg);
  g.b.model.graph->outputs.push_back(g.db);
  eliminate_dead_code(g.b.model);
  const ir::Node& n = *g.b.model.graph->nodes[0];
  EXPECT_EQ(n.outputs[0], g.dx);
  EXPECT_EQ(n.outputs[1], nullptr);
  EXPECT_EQ(n.outputs[2], g.db);
  EXPECT_NO_THROW(ir::verify(g.b.model));
}

TEST(DeadCode, ConvGradWithNoOutputReadGoesWhole) {
  ConvGradGraph g;
  ir::Value* kept = g.b.value("kept", {2, 3, 6, 6});
  g.b.node("Neg", {g.b.model.graph->inputs[1]}, {kept});
  g.b.model.graph->outputs.push_back(kept);
  EXPECT_EQ(eliminate_dead_code(g.b.model), 1);
  ASSERT_EQ(g.b.model.graph->nodes.size(), 1u);
  EXPECT_EQ(g.b.model.graph->nodes[0]->op_type, "Neg");
}

// Before opset 14, BatchNormalization trains when its statistics outputs are present: they
// stay although nothing reads them.
TEST(DeadCode, OnnxOpsKeepTheirOptionalOutputs) {
  Builder b(9);
  ir::Value* x = b.input("x", {2, 3, 4, 4});
  std::vector<ir::Value*> in = {x};
  for (const char* p : {"scale", "bias", "mean", "var"}) in.push_back(b.input(p, {3}));
  std::vector<ir::Value*> out = {b.value("y", {2, 3, 4, 4})};
  for (const char* s : {"running_mean", "running_var", "saved_mean", "saved_var"})
    out.push_back(b.value(s, {3}));
  b.node("BatchNormalization", in, out);
  b.model.graph->outputs.push_back(out[0]);
  eliminate_dead_code(b.model);
  ASSERT_EQ(b.model.graph->nodes.size(), 1u);
  EXPECT_EQ(b.model.graph->nodes[0]->outputs, out);
}

// In a compiled training step: the first convolution reads the image, which has no gradient,
// so its ConvGrad computes no dX; the second's dX is the first's dY. Both convolutions of
// models/cnn.onnx have a bias, so both compute dB.
TEST(DeadCode, TrainingPlanComputesNoGradientOfTheImage) {
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "sgd";
  o.optimizer.lr = 0.1;
  const plan::Plan p = compiler::compile_file(std::string(AMPC_SOURCE_DIR) + "/models/cnn.onnx", o);
  int seen = 0;
  for (const plan::Step& s : p.steps()) {
    if (s.op() != "ConvGrad") continue;
    ASSERT_EQ(s.source_nodes_size(), 1);
    ASSERT_EQ(s.outputs_size(), 3);
    const bool first = s.source_nodes(0).find("/conv1/") != std::string::npos;
    EXPECT_EQ(s.outputs(0) < 0, first) << s.source_nodes(0);
    EXPECT_GE(s.outputs(1), 0) << s.source_nodes(0);
    EXPECT_GE(s.outputs(2), 0) << s.source_nodes(0);
    ++seen;
  }
  EXPECT_EQ(seen, 2);
}

}  // namespace
}  // namespace ampc
