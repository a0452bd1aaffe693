// Fused plans train bit-identically to unfused ones on the CPU backend: models/{mlp,cnn,gpt}
// compiled for training with Adam in fp32, fp16 (dynamic loss scaling) and bf16, with and
// without elementwise fusion (target cpu), run 5 steps on the same real batches; every
// step's loss and every piece of state after the last step must have the same bits. In fp16
// the initial scale (1e6) overflows the first step(s), so skipped steps run too (the guarded
// optimizer kernel writing nothing) before the scale backs off into real updates. Prints
// the kernel counts (plan::count_kernels) of both plans; gpt in fp16 must fuse into at most a
// third of the unfused plan's kernels.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <ostream>
#include <string>

#include "driver/pipeline.h"
#include "passes/loss_scaling.h"
#include "runtime/cpu/executor.h"
#include "runtime/data/batcher.h"
#include "runtime/plan/plan_stats.h"
#include "runtime/state_copies.h"

namespace ampc {
namespace {

constexpr int kSteps = 5;

struct Case {
  std::string model;
  std::string data;
  passes::Precision precision;
};

std::string name_of(const Case& c) {
  return c.model + "_" + std::string(passes::precision_name(c.precision));
}
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return name_of(info.param);
}
void PrintTo(const Case& c, std::ostream* os) {
  *os << name_of(c);
}

plan::Plan compile(const Case& c, bool fuse) {
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "adam";
  o.autocast.precision = c.precision;
  if (c.precision == passes::Precision::kFP16) o.loss_scale.init_scale = 1e6;
  o.lowering.fuse = fuse;
  o.lowering.target = "cpu";
  return compiler::compile_file(std::string(AMPC_SOURCE_DIR) + "/models/" + c.model + ".onnx", o);
}

// The first kSteps batches of the model's data set, in file order.
std::vector<std::map<std::string, rt::Tensor>> batches(const Case& c, const plan::Plan& p) {
  std::map<std::string, rt::data::InputSpec> specs;
  int64_t batch = 0;
  for (const auto& binding : p.inputs()) {
    const auto& b = p.buffers(binding.buffer());
    specs[binding.name()] = {static_cast<DType>(b.dtype()),
                             {b.shape().begin() + 1, b.shape().end()}};
    batch = b.shape(0);
  }
  rt::data::Batcher batcher(
      rt::data::Dataset::open(std::string(AMPC_SOURCE_DIR) + "/models/data/" + c.data + ".npz"),
      specs, {.batch_size = batch});
  std::vector<std::map<std::string, rt::Tensor>> out;
  for (int s = 0; s < kSteps; ++s) out.push_back(batcher.next());
  return out;
}

struct Trained {
  std::vector<rt::Tensor> losses;
  std::map<std::string, rt::Tensor> state;
  double seconds_per_step = 0;
};

Trained train(const plan::Plan& p, const std::vector<std::map<std::string, rt::Tensor>>& data) {
  rt::cpu::Executor exec(p);
  Trained r;
  const auto start = std::chrono::steady_clock::now();
  for (const auto& batch : data) r.losses.push_back(exec.run(batch).at("loss"));
  r.seconds_per_step =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kSteps;
  r.state = exec.state();
  return r;
}

bool same_bits(const rt::Tensor& a, const rt::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

class FusedPlan : public ::testing::TestWithParam<Case> {};

TEST_P(FusedPlan, TrainsBitIdenticallyToTheUnfusedPlan) {
  const Case& c = GetParam();
  const plan::Plan unfused = compile(c, false);
  const plan::Plan fused = compile(c, true);
  const int64_t n_unfused = plan::count_kernels(unfused);
  const int64_t n_fused = plan::count_kernels(fused);
  EXPECT_EQ(unfused.kernels_size(), 0);
  EXPECT_GT(fused.kernels_size(), 0);
  EXPECT_LT(n_fused, n_unfused);

  const auto data = batches(c, unfused);
  const Trained want = train(unfused, data);
  const Trained got = train(fused, data);
  std::cout << "[kernels] " << c.model << " " << passes::precision_name(c.precision) << ": unfused "
            << n_unfused << ", fused " << n_fused << " (" << fused.kernels_size()
            << " distinct kernels); CPU step " << want.seconds_per_step * 1e3 << " ms unfused, "
            << got.seconds_per_step * 1e3 << " ms fused\n";
  if (c.model == "gpt" && c.precision == passes::Precision::kFP16) {
    EXPECT_LE(3 * n_fused, n_unfused) << "gpt fp16 fuses into at most a third of the kernels";
  }

  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t s = 0; s < want.losses.size(); ++s) {
    EXPECT_TRUE(same_bits(got.losses[s], want.losses[s])) << "loss of step " << s << " differs";
  }
  ASSERT_EQ(got.state.size(), want.state.size());
  int moved = 0;
  for (const auto& b : unfused.buffers()) {
    if (b.role() != plan::STATE || b.copy_of() != 0) continue;  // state() has no copies
    const rt::Tensor& now = want.state.at(b.name());
    moved += !same_bits(rt::initial_value(unfused, b), now);
  }
  EXPECT_GT(moved, 0) << "training moved no state";
  if (c.precision == passes::Precision::kFP16) {
    EXPECT_LT(want.state.at(passes::kScaleName).data<float>()[0], 1e6f) << "no step skipped";
  }
  for (const auto& [name, tensor] : want.state) {
    ASSERT_TRUE(got.state.count(name)) << name;
    EXPECT_TRUE(same_bits(got.state.at(name), tensor)) << "state '" << name << "' differs";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, FusedPlan,
                         ::testing::Values(Case{"mlp", "digits", passes::Precision::kFP32},
                                           Case{"mlp", "digits", passes::Precision::kFP16},
                                           Case{"mlp", "digits", passes::Precision::kBF16},
                                           Case{"cnn", "digits_images", passes::Precision::kFP32},
                                           Case{"cnn", "digits_images", passes::Precision::kFP16},
                                           Case{"cnn", "digits_images", passes::Precision::kBF16},
                                           Case{"gpt", "seqtask", passes::Precision::kFP32},
                                           Case{"gpt", "seqtask", passes::Precision::kFP16},
                                           Case{"gpt", "seqtask", passes::Precision::kBF16}),
                         case_name);

}  // namespace
}  // namespace ampc
