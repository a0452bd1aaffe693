// torch's cross-entropy with class probabilities, exported as a SoftmaxCrossEntropyLoss with
// float labels (frontend/onnx/soft_target_cross_entropy.h), in the opsets where ReduceSum
// and ReduceMean take their axes as an attribute (12) and as an input (17, 18): each
// reduction, with and without class weights, against the formula computed here in double
// (PyTorch's: -sum_c w_c p_c log_softmax(x)_c per element; the mean over the batch and
// spatial size). The zoo's soft_targets model checks the gradients against PyTorch float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/temp_dir.h"

namespace ampc {
namespace {

namespace ob = test::onnx_build;

constexpr int64_t kN = 2, kC = 3;  // scores [N, C] or [N, C, D]
const std::vector<float> kWeight = {0.5f, 1.0f, 2.0f};

struct Case {
  int64_t opset;
  std::string reduction;
  bool weighted;
  int64_t spatial;  // D; 0: scores [N, C]

  std::vector<int64_t> scores_shape() const {
    return spatial ? std::vector<int64_t>{kN, kC, spatial} : std::vector<int64_t>{kN, kC};
  }
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "opset " << c.opset << ", " << c.reduction << (c.weighted ? ", weighted" : "") << ", D "
      << c.spatial;
}

// scores and probabilities (summing to 1 over C) of c.scores_shape(), as graph inputs.
onnx::ModelProto soft_target_model(const Case& c) {
  onnx::ModelProto m = ob::model("soft_ce", c.opset);
  auto* g = m.mutable_graph();
  ob::add_float_io(g, "scores", c.scores_shape());
  ob::add_float_io(g, "probs", c.scores_shape());
  std::vector<std::string> in = {"scores", "probs"};
  if (c.weighted) {
    ob::add_float_initializer(g, "weight", {kC}, kWeight);
    in.push_back("weight");
  }
  auto* n = ob::add_node(g, "SoftmaxCrossEntropyLoss", in, "loss");
  n->add_output("log_prob");
  ob::add_string(n, "reduction", c.reduction);
  std::vector<int64_t> loss_shape;
  if (c.reduction == "none") loss_shape = {kN};
  if (c.reduction == "none" && c.spatial) loss_shape.push_back(c.spatial);
  ob::add_float_io(g, "loss", loss_shape, /*output=*/true);
  ob::add_float_io(g, "log_prob", c.scores_shape(), /*output=*/true);
  return m;
}

// Element [n, c, d] of a [N, C, D] tensor (D = 1 for [N, C]).
double at(const rt::Tensor& t, int64_t n, int64_t c, int64_t d, int64_t kD) {
  return t.data<float>()[(n * kC + c) * kD + d];
}

class SoftTargetCrossEntropy : public ::testing::TestWithParam<Case> {};

TEST_P(SoftTargetCrossEntropy, ComputesTorchsFormula) {
  const Case c = GetParam();
  const int64_t kD = std::max<int64_t>(c.spatial, 1);
  test::TempDir dir;
  ob::write_model(soft_target_model(c), dir / "m.onnx");
  rt::cpu::Executor exec(compiler::compile_file(dir / "m.onnx", {}));
  rt::Tensor scores(DType::kFloat32, c.scores_shape()), probs(DType::kFloat32, c.scores_shape());
  for (int64_t i = 0; i < scores.numel(); ++i) {
    scores.data<float>()[i] = 0.7f * static_cast<float>(i % 5) - 1.2f;
  }
  for (int64_t n = 0; n < kN; ++n) {
    for (int64_t d = 0; d < kD; ++d) {
      const float p[kC] = {0.2f, 0.5f + 0.1f * static_cast<float>(n + d), 0.0f};
      for (int64_t k = 0; k < kC; ++k) {
        probs.data<float>()[(n * kC + k) * kD + d] = k == 2 ? 1.0f - p[0] - p[1] : p[k];
      }
    }
  }
  const auto out = exec.run({{"scores", scores}, {"probs", probs}});
  std::vector<double> per;  // [N, D]
  for (int64_t n = 0; n < kN; ++n) {
    for (int64_t d = 0; d < kD; ++d) {
      double top = -INFINITY, sum = 0, loss = 0;
      for (int64_t k = 0; k < kC; ++k) top = std::max(top, at(scores, n, k, d, kD));
      for (int64_t k = 0; k < kC; ++k) sum += std::exp(at(scores, n, k, d, kD) - top);
      for (int64_t k = 0; k < kC; ++k) {
        const double log_prob = at(scores, n, k, d, kD) - top - std::log(sum);
        EXPECT_NEAR(at(out.at("log_prob"), n, k, d, kD), log_prob, 1e-6);
        loss -= (c.weighted ? kWeight[k] : 1.0) * at(probs, n, k, d, kD) * log_prob;
      }
      per.push_back(loss);
    }
  }
  const rt::Tensor& loss = out.at("loss");
  if (c.reduction == "none") {
    ASSERT_EQ(loss.numel(), kN * kD);
    for (size_t i = 0; i < per.size(); ++i) EXPECT_NEAR(loss.data<float>()[i], per[i], 1e-6);
    return;
  }
  double total = 0;
  for (double v : per) total += v;
  if (c.reduction == "mean") total /= static_cast<double>(per.size());  // not by the weights
  ASSERT_EQ(loss.numel(), 1);
  EXPECT_NEAR(loss.data<float>()[0], total, 1e-6);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int64_t opset : {12, 17, 18}) {
    for (const char* r : {"mean", "sum", "none"}) {
      for (bool w : {false, true}) {
        out.push_back({opset, r, w, 0});
        if (opset >= 13) out.push_back({opset, r, w, 2});
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(OpsetsReductionsWeights, SoftTargetCrossEntropy,
                         ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return "opset" + std::to_string(info.param.opset) + "_" +
                                  info.param.reduction + (info.param.weighted ? "_weighted" : "") +
                                  (info.param.spatial ? "_spatial" : "");
                         });

// Before opset 13 LogSoftmax normalises over every axis from 1 on: spatial probability
// targets are refused there, in one line naming the node.
TEST(SoftTargetCrossEntropyRefusal, SpatialBeforeOpset13) {
  test::TempDir dir;
  ob::write_model(soft_target_model({12, "mean", false, 2}), dir / "m.onnx");
  try {
    compiler::compile_file(dir / "m.onnx", {});
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "node '/loss' (SoftmaxCrossEntropyLoss): probability targets of rank 3 need opset "
              "13 or later (the model has 12)");
  }
}

}  // namespace
}  // namespace ampc
