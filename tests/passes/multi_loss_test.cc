// Several losses (`--loss A --loss B`, AutodiffOptions::losses), compiled and run in-process
// on a small two-loss model built with onnx's helper: one SGD step with the losses A and B
// moves the parameters exactly as one step of the same model whose single output is A + B
// (both backwards seed each loss with the same value, so the gradients match bit for bit;
// the test allows 1e-6 relative), with and without a loss scale. With loss scaling the
// step has one UnscaleCheck (one found_inf for every gradient). The plan records the
// losses for the trainer; a loss named twice or one that no parameter reaches is an error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "base/error.h"
#include "driver/pipeline.h"
#include "frontend/onnx/export_training.h"
#include "runtime/cpu/executor.h"
#include "tests/support/temp_dir.h"

namespace ampc {
namespace {

using ::testing::HasSubstr;

// two.onnx: outputs A = mean((tanh(x W1) W2 - t)^2), B = mean(tanh(x W1)^2) and C = mean(t)
// (no parameter); sum.onnx: the same graph with the single output S = A + B.
constexpr const char* kMakeModels = R"(
import sys, os, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
d = sys.argv[1]
rng = np.random.default_rng(3)
w1 = (rng.standard_normal((4, 5)) * 0.5).astype(np.float32)
w2 = (rng.standard_normal((5, 3)) * 0.5).astype(np.float32)
def model(outputs, extra_nodes, name):
    nodes = [h.make_node("MatMul", ["x", "W1"], ["z"], name="mm1"),
             h.make_node("Tanh", ["z"], ["hid"], name="tanh"),
             h.make_node("MatMul", ["hid", "W2"], ["y"], name="mm2"),
             h.make_node("Sub", ["y", "t"], ["diff"], name="sub"),
             h.make_node("Mul", ["diff", "diff"], ["sq"], name="sq"),
             h.make_node("ReduceMean", ["sq"], ["A"], name="mean_a", keepdims=0),
             h.make_node("Mul", ["hid", "hid"], ["hsq"], name="hsq"),
             h.make_node("ReduceMean", ["hsq"], ["B"], name="mean_b", keepdims=0)] + extra_nodes
    g = h.make_graph(nodes, name,
                     [h.make_tensor_value_info("x", T.FLOAT, [8, 4]),
                      h.make_tensor_value_info("t", T.FLOAT, [8, 3])],
                     [h.make_tensor_value_info(o, T.FLOAT, []) for o in outputs],
                     [nh.from_array(w1, "W1"), nh.from_array(w2, "W2")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, name + ".onnx"))
model(["A", "B", "C"], [h.make_node("ReduceMean", ["t"], ["C"], name="mean_c", keepdims=0)], "two")
model(["S"], [h.make_node("Add", ["A", "B"], ["S"], name="sum")], "sum")
)";

class MultiLoss : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string script = dir_ / "make.py";
    std::ofstream(script) << kMakeModels;
    const std::string cmd = "/usr/bin/python3 '" + script + "' '" + dir_.path().string() + "'";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }

  static compiler::CompileOptions sgd(std::vector<std::string> losses, const std::string& scale) {
    compiler::CompileOptions o;
    o.train = true;
    o.optimizer.kind = "sgd";
    o.optimizer.lr = 0.5;
    o.autodiff.losses = std::move(losses);
    o.loss_scale.mode = scale;
    return o;
  }

  // The parameters after one step on a fixed batch.
  std::map<std::string, rt::Tensor> one_step(const std::string& model,
                                             const compiler::CompileOptions& o) {
    rt::cpu::Executor executor(compiler::compile_file(dir_ / model, o));
    std::map<std::string, rt::Tensor> batch;
    rt::Tensor x(DType::kFloat32, {8, 4}), t(DType::kFloat32, {8, 3});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::sin(0.7f * i);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::cos(0.3f * i);
    batch["x"] = std::move(x);
    batch["t"] = std::move(t);
    executor.run(batch);
    auto state = executor.state();
    return {{"W1", state.at("W1")}, {"W2", state.at("W2")}};
  }

  static void expect_close(const std::map<std::string, rt::Tensor>& a,
                           const std::map<std::string, rt::Tensor>& b) {
    for (const auto& [name, ta] : a) {
      const rt::Tensor& tb = b.at(name);
      ASSERT_EQ(ta.numel(), tb.numel());
      double diff = 0, norm = 0;
      for (int64_t i = 0; i < ta.numel(); ++i) {
        diff = std::max(diff, std::abs(double(ta.data<float>()[i]) - tb.data<float>()[i]));
        norm = std::max(norm, std::abs(double(tb.data<float>()[i])));
      }
      EXPECT_LE(diff, 1e-6 * norm) << name;
    }
  }

  std::string error_of(const compiler::CompileOptions& o) {
    try {
      compiler::compile_file(dir_ / "two.onnx", o);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }

  test::TempDir dir_;
};

TEST_F(MultiLoss, GradientsAreThoseOfTheSum) {
  const auto sum = one_step("sum.onnx", sgd({}, ""));
  expect_close(one_step("two.onnx", sgd({"A", "B"}, "")), sum);
  // Power-of-two scales are exact, so the scaled step moves the parameters the same way.
  expect_close(one_step("two.onnx", sgd({"A", "B"}, "dynamic")), sum);
  expect_close(one_step("two.onnx", sgd({"B", "A"}, "static:1024")), sum);
}

TEST_F(MultiLoss, OneUnscaleCheckForAllGradientsAndTheLossesRecorded) {
  const auto o = sgd({"A", "B"}, "dynamic");
  auto model = compiler::load_for_compile(dir_ / "two.onnx", o);
  const plan::Plan p = compiler::compile_model(*model, o, "two");
  const auto proto = onnx_io::export_training_model(*model);
  int checks = 0;
  for (const auto& n : proto.training_info(0).algorithm().node())
    checks += n.op_type() == "UnscaleCheck";
  EXPECT_EQ(checks, 1);
  std::string recorded;
  for (const auto& option : p.options())
    if (option.key() == compiler::kLossesOption) recorded = option.value();
  EXPECT_EQ(recorded, "A,B");
}

TEST_F(MultiLoss, RefusesALossTwiceAndALossWithoutParameters) {
  EXPECT_THAT(error_of(sgd({"A", "A"}, "")), HasSubstr("--loss A is given twice"));
  EXPECT_THAT(error_of(sgd({"A", "C"}, "")),
              HasSubstr("loss 'C' does not depend on any trainable parameter"));
  EXPECT_THAT(error_of(sgd({"A", "D"}, "")), HasSubstr("--loss D: the model has no output"));
}

}  // namespace
}  // namespace ampc
