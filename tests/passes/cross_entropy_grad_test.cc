// The gradient of SoftmaxCrossEntropyLoss (passes/autodiff/rules_softmax.cc): its one-hot of the
// labels is a float32 comparison that the fuser joins to the gradient's elementwise kernel, so
// no step compares [N, C] int64 values or stores [N, C] booleans; and one SGD step (lr 1) moves
// the scores by exactly that gradient, softmax(s) - onehot(label) over the labels kept, against
// the formula in double (ignore_index -100, reductions mean and sum).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "ir/tensor.h"
#include "runtime/cpu/executor.h"

namespace ampc {
namespace {

constexpr int64_t kRows = 6, kClasses = 7;

// s [6, 7], a trained initializer -> SoftmaxCrossEntropyLoss(s, labels) -> loss.
std::unique_ptr<ir::Model> loss_model(const std::string& reduction, bool ignore) {
  auto model = std::make_unique<ir::Model>();
  model->opsets.push_back({"", 17});
  model->graph->name = "ce";
  ir::Graph& g = *model->graph;
  ir::Value* s = g.add_value("s", {DType::kFloat32, std::vector<int64_t>{kRows, kClasses}});
  ir::Tensor init;
  init.name = "s";
  init.dtype = DType::kFloat32;
  init.dims = {kRows, kClasses};
  std::vector<float> values(kRows * kClasses);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.9f * static_cast<float>(i));
  init.bytes.resize(values.size() * sizeof(float));
  std::memcpy(init.bytes.data(), values.data(), init.bytes.size());
  s->initializer = std::make_unique<ir::Tensor>(std::move(init));
  s->from_model = true;  // a parameter of the model, trained
  g.initializers.push_back(s);
  ir::Value* labels = g.add_value("labels", {DType::kInt64, std::vector<int64_t>{kRows}});
  labels->is_graph_input = true;
  g.inputs.push_back(labels);
  ir::Value* loss = g.add_value("loss", {DType::kFloat32, std::vector<int64_t>{}});
  ir::Node* n = g.add_node("SoftmaxCrossEntropyLoss", {s, labels}, {loss}, "ce");
  n->attributes.push_back(ir::Attribute::make_string("reduction", reduction));
  if (ignore) n->attributes.push_back(ir::Attribute::make_int("ignore_index", -100));
  g.outputs.push_back(loss);
  return model;
}

compiler::CompileOptions sgd(const std::string& target) {
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "sgd";
  o.optimizer.lr = 1.0;
  o.lowering.target = target;
  return o;
}

// No plan step is a comparison of its own: without ignore_index nothing else compares.
TEST(CrossEntropyGrad, OneHotComparisonJoinsTheGradientKernel) {
  for (const char* target : {"cpu", "cuda:sm_90"}) {
    auto model = loss_model("mean", false);
    const plan::Plan p = compiler::compile_model(*model, sgd(target), "ce");
    int fused = 0;
    for (const plan::Step& step : p.steps()) {
      EXPECT_NE(step.op(), "Equal") << target << ": " << step.source_nodes(0);
      fused += step.op() == "FusedElementwise";
    }
    EXPECT_GT(fused, 0) << target;
  }
}

TEST(CrossEntropyGrad, OneSgdStepMovesTheScoresByTheGradient) {
  const std::vector<int64_t> labels = {3, -100, 0, 6, 6, 1};
  for (const char* reduction : {"mean", "sum"}) {
    auto model = loss_model(reduction, true);
    const std::vector<float> s0(
        reinterpret_cast<const float*>(model->graph->initializers[0]->initializer->bytes.data()),
        reinterpret_cast<const float*>(model->graph->initializers[0]->initializer->bytes.data()) +
            kRows * kClasses);
    rt::cpu::Executor exec(compiler::compile_model(*model, sgd("cpu"), "ce"));
    rt::Tensor l(DType::kInt64, {kRows});
    std::memcpy(l.data<int64_t>(), labels.data(), labels.size() * sizeof(int64_t));
    exec.run({{"labels", l}});
    const rt::Tensor s1 = exec.state().at("s");
    const double kept = 5;  // the labels not ignored
    for (int64_t i = 0; i < kRows; ++i) {
      double m = -INFINITY, sum = 0;
      for (int64_t k = 0; k < kClasses; ++k) m = std::max(m, double(s0[i * kClasses + k]));
      for (int64_t k = 0; k < kClasses; ++k) sum += std::exp(s0[i * kClasses + k] - m);
      for (int64_t k = 0; k < kClasses; ++k) {
        const size_t at = static_cast<size_t>(i * kClasses + k);
        double grad = 0;
        if (labels[i] != -100) {
          grad = std::exp(s0[at] - m) / sum - (labels[i] == k ? 1.0 : 0.0);
          if (std::string(reduction) == "mean") grad /= kept;
        }
        EXPECT_NEAR(s1.data<float>()[at], s0[at] - grad, 2e-7)
            << reduction << " row " << i << " class " << k;
      }
    }
  }
}

}  // namespace
}  // namespace ampc
