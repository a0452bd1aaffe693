// PyTorch oracle for learning-rate schedules and parameter groups (passes/lr_schedule.h,
// --no-decay, --lr-mult): the mlp trained for 6 steps on its first batch with each run of
// tests/oracle/torch_training_oracle.py --schedules (torch.optim with parameter groups and
// torch.optim.lr_scheduler stepped after every optimizer step, float64) and by ampc compiled
// with the same options; every parameter within 1e-4 (relative, norm-wise) or twice
// PyTorch float32's own error, and the schedule's count at the number of steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "driver/pipeline.h"
#include "passes/lr_schedule.h"
#include "runtime/cpu/executor.h"
#include "runtime/io/npy.h"
#include "tests/oracle/oracle_util.h"
#include "tests/support/temp_dir.h"

namespace ampc {
namespace {
namespace fs = std::filesystem;

constexpr double kMaxRelativeError = 1e-4;

struct ScheduleRun {
  const char* name;
  passes::OptimizerOptions options;
  int steps;
};

// The runs of SCHEDULES in torch_training_oracle.py, as ampc's options.
std::vector<ScheduleRun> runs() {
  std::vector<ScheduleRun> r;
  passes::OptimizerOptions a;
  a.kind = "adamw";
  a.lr = 1e-2;
  a.weight_decay = 0.1;
  a.schedule = {.kind = "cosine", .warmup_steps = 2, .warmup_start_factor = 0.1, .total_steps = 6};
  a.no_decay = {"*.bias", "ln1.*"};
  a.lr_mult = {{"fc2.*", 0.5}};
  r.push_back({"adamw_cosine", a, 6});
  passes::OptimizerOptions s;
  s.kind = "sgd";
  s.lr = 0.1;
  s.momentum = 0.9;
  s.weight_decay = 1e-3;
  s.schedule = {.kind = "step", .step_size = 2, .gamma = 0.5};
  s.no_decay = {"*.bias"};
  s.lr_mult = {{"fc1.*", 2.0}};
  r.push_back({"sgd_step", s, 6});
  passes::OptimizerOptions l;
  l.kind = "adam";
  l.lr = 1e-2;
  l.weight_decay = 0.01;
  l.schedule = {.kind = "linear",
                .warmup_steps = 3,
                .warmup_start_factor = 0.2,
                .total_steps = 7,
                .min_lr_factor = 0.1};
  r.push_back({"adam_linear", l, 6});
  return r;
}

TEST(LrScheduleOracle, ParametersAfterScheduledStepsWithGroups) {
  test::TempDir dir;
  ASSERT_TRUE(oracle::run_training_oracle(dir.path(), "--schedules 2>/dev/null"))
      << "the oracle script failed";
  const oracle::Model& mlp = oracle::example_models()[0];
  for (const ScheduleRun& run : runs()) {
    SCOPED_TRACE(run.name);
    compiler::CompileOptions compile;
    compile.train = true;
    compile.optimizer = run.options;
    rt::cpu::Executor exec(
        compiler::compile_file(std::string(AMPC_SOURCE_DIR) + "/models/mlp.onnx", compile));
    const auto batch = oracle::read_batch(mlp, dir.path());
    for (int s = 0; s < run.steps; ++s) exec.run(batch);
    const auto state = exec.state();
    EXPECT_EQ(state.at(passes::kScheduleStepName).data<float>()[0], static_cast<float>(run.steps));
    const fs::path f64 = dir.path() / (std::string("mlp.") + run.name);
    const fs::path f32 = dir.path() / (std::string("mlp.") + run.name + ".f32");
    int compared = 0;
    double worst = 0;
    for (const auto& entry : fs::directory_iterator(f64)) {
      const std::string param = entry.path().stem().string();
      const rt::Tensor want = rt::io::read_npy(entry.path().string());
      const rt::Tensor torch32 = rt::io::read_npy((f32 / entry.path().filename()).string());
      auto it = state.find(param);
      ASSERT_NE(it, state.end()) << "ampc did not train '" << param << "'";
      const double error = oracle::relative_error(it->second, want);
      EXPECT_LE(error, std::max(kMaxRelativeError, 2 * oracle::relative_error(torch32, want)))
          << "parameter '" << param << "'";
      worst = std::max(worst, error);
      ++compared;
    }
    EXPECT_EQ(compared, 6);
    std::printf("%s: max parameter error %.3g after %d steps\n", run.name, worst, run.steps);
  }
}

}  // namespace
}  // namespace ampc
