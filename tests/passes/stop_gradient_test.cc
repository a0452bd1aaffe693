// The backward stops where the model's metadata `ampc.stop_gradient` says (where PyTorch's
// autograd stopped: .detach(), torch.no_grad()), and a model that records those places gives
// Round, Floor, Ceil and Sign PyTorch's gradient, 0. The expected gradients are written out
// by hand in double: d/dp of sum(R * tanh(p) * s) with s = p * p held constant is
// R (1 - tanh(p)^2) p^2 (through s as well it would add 2 R tanh(p) p).
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "driver/pipeline.h"
#include "passes/autodiff/autodiff.h"
#include "runtime/cpu/executor.h"
#include "tests/passes/fd_check.h"

namespace ampc {
namespace {

using fd::f64;
using passes::autodiff::GradBuilder;
using P = const std::vector<ir::Value*>&;

const std::vector<double> kP = {0.3, -1.1, 0.8, 1.6, -0.4, 2.2};
const std::vector<double> kR = {1.0, -0.5, 2.0, 0.25, -1.5, 0.75};

// Differentiates `m` (parameters p0..., constants fwd/* and R frozen) and returns p0's
// gradient computed by the CPU backend.
std::vector<double> gradient_of_p0(ir::Model& m) {
  const auto grads = passes::differentiate(m, {.loss = "", .freeze = {"R", "fwd/*"}});
  EXPECT_EQ(grads.size(), 1u);
  m.graph->outputs.push_back(grads.at(0).gradient);
  rt::cpu::Executor exec(compiler::compile_model(m, compiler::CompileOptions{}, "stop"));
  const auto out = exec.run({});
  const rt::Tensor& g = out.at(grads.at(0).gradient->name);
  return {g.data<double>(), g.data<double>() + g.numel()};
}

// sum(R * tanh(p) * Identity(p * p)), the Identity's output named "stopped".
std::unique_ptr<ir::Model> tanh_times_square() {
  fd::Case c{"stop", {{2, 3}}, {2, 3}, [](GradBuilder& g, P p) {
               ir::Value* square = g.op("Mul", {p[0], p[0]}, f64({2, 3}));
               ir::Value* stopped = g.op("Identity", {square}, f64({2, 3}));
               g.graph().rename_value(stopped, "stopped");
               return g.op("Mul", {g.op("Tanh", {p[0]}, f64({2, 3})), stopped}, f64({2, 3}));
             }};
  return fd::make_model(c, {kP}, kR);
}

TEST(StopGradient, TheListedValueIsAConstantOfTheBackward) {
  auto m = tanh_times_square();
  m->metadata.push_back({passes::kStopGradientKey, "unrelated\nstopped"});
  const std::vector<double> got = gradient_of_p0(*m);
  ASSERT_EQ(got.size(), kP.size());
  for (size_t i = 0; i < kP.size(); ++i) {
    const double t = std::tanh(kP[i]);
    EXPECT_NEAR(got[i], kR[i] * (1 - t * t) * kP[i] * kP[i], 1e-12) << i;
  }
}

TEST(StopGradient, WithoutTheListTheBackwardGoesThrough) {
  auto m = tanh_times_square();
  m->metadata.push_back({passes::kStopGradientKey, ""});
  const std::vector<double> got = gradient_of_p0(*m);
  for (size_t i = 0; i < kP.size(); ++i) {
    const double t = std::tanh(kP[i]);
    EXPECT_NEAR(got[i], kR[i] * ((1 - t * t) * kP[i] * kP[i] + 2 * t * kP[i]), 1e-12) << i;
  }
}

// sum(R * (p + step(p))): PyTorch's gradient is R when the export records where autograd
// stops (without the record the compiler refuses: autodiff_fd_test.cc).
TEST(StopGradient, StepFunctionsHaveZeroGradientInAModelThatRecordsStops) {
  for (const char* op : {"Round", "Floor", "Ceil", "Sign"}) {
    fd::Case c{op, {{2, 3}}, {2, 3}, [op](GradBuilder& g, P p) {
                 return g.op("Add", {p[0], g.op(op, {p[0]}, f64({2, 3}))}, f64({2, 3}));
               }};
    auto m = fd::make_model(c, {kP}, kR);
    m->metadata.push_back({passes::kStopGradientKey, ""});
    const std::vector<double> got = gradient_of_p0(*m);
    for (size_t i = 0; i < kP.size(); ++i) EXPECT_EQ(got[i], kR[i]) << op << " " << i;
  }
}

// p + (tanh(p) - p): a straight-through estimator whose detach a plain export dropped. Without
// the record it is refused (PyTorch's gradient would be R, the file's R tanh'(p)); in a file
// that records where autograd stops, no stop there means the sum as written.
TEST(StopGradient, AStraightThroughFormWithoutTheRecordIsRefused) {
  fd::Case c{"ste", {{2, 3}}, {2, 3}, [](GradBuilder& g, P p) {
               ir::Value* q = g.op("Tanh", {p[0]}, f64({2, 3}));
               return g.op("Add", {p[0], g.op("Sub", {q, p[0]}, f64({2, 3}))}, f64({2, 3}));
             }};
  auto plain = fd::make_model(c, {kP}, kR);
  try {
    passes::differentiate(*plain, {.loss = "", .freeze = {"R", "fwd/*"}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("computes a + (b - a), the form torch.onnx.export "
                                         "leaves of a straight-through estimator"),
              std::string::npos)
        << e.what();
  }
  auto recorded = fd::make_model(c, {kP}, kR);
  recorded->metadata.push_back({passes::kStopGradientKey, ""});
  const std::vector<double> got = gradient_of_p0(*recorded);
  for (size_t i = 0; i < kP.size(); ++i) {
    const double t = std::tanh(kP[i]);
    EXPECT_NEAR(got[i], kR[i] * (1 - t * t), 1e-12) << i;
  }
}

// A loss that reaches the parameters only through a stopped value does not depend on them,
// as torch's backward of several losses refuses one that does not require grad.
TEST(StopGradient, ALossOnlyThroughAStoppedValueDependsOnNothing) {
  auto m = tanh_times_square();
  ir::Graph& g = *m->graph;
  GradBuilder b(g, "fwd2");
  ir::Value* detached_loss = b.op("ReduceSum", {g.find_value("stopped")}, f64({}),
                                  passes::autodiff::attrs(ir::Attribute::make_int("keepdims", 0)));
  g.rename_value(detached_loss, "detached_loss");
  g.outputs.push_back(detached_loss);
  m->metadata.push_back({passes::kStopGradientKey, "stopped"});
  try {
    passes::differentiate(
        *m,
        {.loss = "", .freeze = {"R", "fwd/*"}, .losses = {g.outputs[0]->name, "detached_loss"}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "loss 'detached_loss' does not depend on any trainable parameter: every path "
                  "from one to it goes through a .detach() or a torch.no_grad() block"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ampc
