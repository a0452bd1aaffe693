// read_loss_scores_widened (passes/widened_loss_scores.h): SoftmaxCrossEntropyLoss(Cast(s, float))
// of float16 or bfloat16 scores becomes ampc.SoftmaxCrossEntropyLoss(s); Casts read elsewhere or
// kept, from other types, or to a loss of another type stay. The folded op's forward against the
// formula in double; a bf16 training plan of a classifier has no float copy of its logits, and
// its loss is the formula's on the bf16 logits. (The kernels' bits: TwinRowwise.WidenedScores*.)
#include "passes/widened_loss_scores.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"
#include "tests/passes/widened_test_util.h"

namespace ampc::passes {
namespace {

using Shape = std::vector<int64_t>;
using test_util::add_float_param;
using test_util::float_tensor;

constexpr int64_t kRows = 4, kClasses = 5;

// s [4, 5] of `scores` -> Cast(to) -> SoftmaxCrossEntropyLoss(labels, mean, ignore -1) -> loss.
struct LossGraph {
  std::unique_ptr<ir::Model> model = std::make_unique<ir::Model>();
  ir::Value* s = nullptr;
  ir::Value* cast_out = nullptr;
  ir::Node* loss = nullptr;

  // weights: kUndefined for none, else class weights of that type (an input).
  explicit LossGraph(DType scores, DType to = DType::kFloat32, DType weights = DType::kUndefined) {
    model->opsets.push_back({"", 17});
    model->graph->name = "loss";
    ir::Graph& g = *model->graph;
    s = test_util::add_input(g, "s", {kRows, kClasses}, scores);
    ir::Value* labels = test_util::add_input(g, "labels", {kRows}, DType::kInt64);
    cast_out = g.add_value("s_wide", {to, Shape{kRows, kClasses}});
    ir::Node* cast = g.add_node("Cast", {s}, {cast_out}, "cast");
    cast->attributes.push_back(ir::Attribute::make_int("to", static_cast<int64_t>(to)));
    ir::Value* out = g.add_value("loss", {to, Shape{}});
    std::vector<ir::Value*> in = {cast_out, labels};
    if (weights != DType::kUndefined)
      in.push_back(test_util::add_input(g, "w", {kClasses}, weights));
    loss = g.add_node("SoftmaxCrossEntropyLoss", in, {out}, "ce");
    loss->attributes.push_back(ir::Attribute::make_int("ignore_index", -1));
    g.outputs.push_back(out);
  }

  bool has_cast() const { return test_util::has_cast(*model); }
};

// Scores that 16-bit types hold exactly, and labels with one ignored.
const std::vector<double> kScores = {0.5,  -1.25, 2.0,  0.0,  3.5,  -0.75, 1.5,  -2.0, 0.25, 1.0,
                                     -3.0, 0.125, -0.5, 2.25, -1.0, 1.75,  0.75, -1.5, 4.0,  -0.25};
const std::vector<int64_t> kLabels = {2, -1, 4, 0};

double expected_mean_loss() {
  double total = 0;
  int kept = 0;
  for (int64_t i = 0; i < kRows; ++i) {
    if (kLabels[i] < 0) continue;
    double m = -INFINITY, sum = 0;
    for (int64_t k = 0; k < kClasses; ++k) m = std::max(m, kScores[i * kClasses + k]);
    for (int64_t k = 0; k < kClasses; ++k) sum += std::exp(kScores[i * kClasses + k] - m);
    total += -(kScores[i * kClasses + kLabels[i]] - m - std::log(sum));
    ++kept;
  }
  return total / kept;
}

TEST(WidenedLossScores, FoldsTheCastOf16BitScoresAndTheLossIsTheFormulas) {
  for (DType t : {DType::kBFloat16, DType::kFloat16}) {
    LossGraph l(t);
    EXPECT_EQ(read_loss_scores_widened(*l.model), 1);
    EXPECT_EQ(l.loss->domain, "ampc");
    EXPECT_EQ(l.loss->inputs[0], l.s);
    EXPECT_FALSE(l.has_cast());
    compiler::CompileOptions o;
    o.lowering.target = "cpu";
    rt::cpu::Executor exec(compiler::compile_model(*l.model, o, "loss"));
    rt::Tensor labels(DType::kInt64, {kRows});
    std::memcpy(labels.data<int64_t>(), kLabels.data(), kLabels.size() * sizeof(int64_t));
    auto out = exec.run({{"s", float_tensor(t, kScores, {kRows, kClasses})}, {"labels", labels}});
    const rt::Tensor& loss = out.at("loss");
    ASSERT_EQ(loss.dtype(), DType::kFloat32);
    EXPECT_NEAR(loss.data<float>()[0], expected_mean_loss(), 1e-6);
  }
}

TEST(WidenedLossScores, CastsReadElsewhereKeptOrOfOtherTypesStay) {
  {  // the float scores are read by another node too
    LossGraph l(DType::kBFloat16);
    ir::Value* sum = l.model->graph->add_value("sum", {DType::kFloat32, Shape{}});
    l.model->graph->add_node("ReduceSum", {l.cast_out}, {sum}, "sum");
    l.model->graph->outputs.push_back(sum);
    EXPECT_EQ(read_loss_scores_widened(*l.model), 0);
  }
  {  // ... or kept as a graph output
    LossGraph l(DType::kBFloat16);
    l.model->graph->outputs.push_back(l.cast_out);
    EXPECT_EQ(read_loss_scores_widened(*l.model), 0);
  }
  {  // float64 scores narrowed to float: not a widening
    LossGraph l(DType::kFloat64);
    EXPECT_EQ(read_loss_scores_widened(*l.model), 0);
  }
  {  // a bfloat16 -> float16 Cast: the loss is not float's
    LossGraph l(DType::kBFloat16, DType::kFloat16);
    EXPECT_EQ(read_loss_scores_widened(*l.model), 0);
  }
  {  // float weights are what the widened op takes; float16 ones stay with the Cast
    LossGraph l(DType::kFloat16, DType::kFloat32, DType::kFloat16);
    EXPECT_EQ(read_loss_scores_widened(*l.model), 0);
    EXPECT_TRUE(l.has_cast());
  }
}

// x [8, 6] (input) . W [6, 5] (trained) -> SoftmaxCrossEntropyLoss: in a bf16 plan the MatMul's
// logits are bf16 and the loss reads them widened. x and W are dyadic, so the bf16 logits are
// exact and the first step's loss is the formula's.
TEST(WidenedLossScores, Bf16ClassifierPlanHasNoFloatCopyOfItsLogits) {
  constexpr int64_t kBatch = 8, kFeatures = 6;
  std::vector<float> w(kFeatures * kClasses), xv(kBatch * kFeatures);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(int64_t(i * 7 % 17) - 8) / 16;
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(int64_t(i * 3 % 5) - 2) / 2;
  auto classifier = [&] {
    auto model = std::make_unique<ir::Model>();
    model->opsets.push_back({"", 17});
    model->graph->name = "classifier";
    ir::Graph& g = *model->graph;
    ir::Value* x = test_util::add_input(g, "x", {kBatch, kFeatures}, DType::kFloat32);
    ir::Value* labels = test_util::add_input(g, "labels", {kBatch}, DType::kInt64);
    ir::Value* wv = add_float_param(g, "W", {kFeatures, kClasses}, w);
    ir::Value* logits = g.add_value("logits", {DType::kFloat32, Shape{kBatch, kClasses}});
    g.add_node("MatMul", {x, wv}, {logits}, "head");
    ir::Value* loss = g.add_value("loss", {DType::kFloat32, Shape{}});
    g.add_node("SoftmaxCrossEntropyLoss", {logits, labels}, {loss}, "ce");
    g.outputs.push_back(loss);
    return model;
  };

  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "sgd";
  o.optimizer.lr = 0.5;
  o.autocast.precision = Precision::kBF16;
  o.lowering.target = "cuda:sm_90";  // the CUDA backend takes the widened op too
  EXPECT_NO_THROW(compiler::compile_model(*classifier(), o, "classifier"));
  o.lowering.target = "cpu";
  plan::Plan p = compiler::compile_model(*classifier(), o, "classifier");
  int widened = 0;
  for (const plan::Step& step : p.steps()) {
    widened += step.op() == "SoftmaxCrossEntropyLoss" && step.domain() == "ampc";
    EXPECT_FALSE(step.op() == "SoftmaxCrossEntropyLoss" && step.domain().empty());
  }
  EXPECT_EQ(widened, 1);

  rt::cpu::Executor exec(std::move(p));
  rt::Tensor xt(DType::kFloat32, {kBatch, kFeatures}), lt(DType::kInt64, {kBatch});
  std::memcpy(xt.data<float>(), xv.data(), xv.size() * sizeof(float));
  for (int64_t i = 0; i < kBatch; ++i) lt.data<int64_t>()[i] = (i * 3 + 1) % kClasses;
  auto out = exec.run({{"x", xt}, {"labels", lt}});
  double total = 0;
  for (int64_t i = 0; i < kBatch; ++i) {
    std::vector<double> z(kClasses, 0.0);
    for (int64_t k = 0; k < kClasses; ++k) {
      for (int64_t f = 0; f < kFeatures; ++f)
        z[k] += double(xv[i * kFeatures + f]) * w[f * kClasses + k];
    }
    const double m = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double v : z) sum += std::exp(v - m);
    total += -(z[lt.data<int64_t>()[i]] - m - std::log(sum));
  }
  EXPECT_NEAR(out.at("loss").data<float>()[0], total / kBatch, 1e-6);
}

}  // namespace
}  // namespace ampc::passes
