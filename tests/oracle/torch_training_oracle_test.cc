// PyTorch oracle for training: ampc compiles each example model for training (SGD with
// momentum, AdamW), runs 3 steps on the model's first batch on the CPU backend, and every
// trained parameter must match PyTorch's (tests/oracle/torch_training_oracle.py: the same
// functional model from the same initializers, torch.optim, float64): the relative error
// ||ampc - torch64|| / ||torch64|| of every parameter is at most 1e-4, or, where PyTorch's
// own float32 run is further than that from float64 (parameters whose true gradient is zero
// get Adam updates of pure rounding noise), at most twice PyTorch's float32 error.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"
#include "runtime/io/npy.h"
#include "tests/oracle/oracle_util.h"
#include "tests/support/temp_dir.h"

namespace ampc {
namespace {
namespace fs = std::filesystem;

using oracle::Model;
using oracle::relative_error;

constexpr double kMaxRelativeError = 1e-4;
constexpr int kSteps = 3;

class TorchTrainingOracle : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    script_ok_ = oracle::run_training_oracle(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }

  // Trains `model` with `options` and compares every parameter PyTorch trained.
  static void check(const Model& model, const std::string& optimizer,
                    const passes::OptimizerOptions& options) {
    ASSERT_TRUE(script_ok_) << "the oracle script failed";
    SCOPED_TRACE(std::string(model.name) + " with " + optimizer);
    compiler::CompileOptions compile;
    compile.train = true;
    compile.optimizer = options;
    rt::cpu::Executor exec(compiler::compile_file(
        std::string(AMPC_SOURCE_DIR) + "/models/" + model.name + ".onnx", compile));
    const auto batch = oracle::read_batch(model, dir_->path());
    for (int s = 0; s < kSteps; ++s) exec.run(batch);
    const auto state = exec.state();
    int compared = 0;
    const fs::path f64 = dir_->path() / (std::string(model.name) + "." + optimizer);
    const fs::path f32 = dir_->path() / (std::string(model.name) + "." + optimizer + ".f32");
    for (const auto& entry : fs::directory_iterator(f64)) {
      const std::string param = entry.path().stem().string();
      const rt::Tensor want = rt::io::read_npy(entry.path().string());
      const rt::Tensor torch32 = rt::io::read_npy((f32 / entry.path().filename()).string());
      auto it = state.find(param);
      ASSERT_NE(it, state.end()) << "ampc did not train '" << param << "'";
      ASSERT_EQ(it->second.shape(), want.shape()) << param;
      const double bound = std::max(kMaxRelativeError, 2 * relative_error(torch32, want));
      EXPECT_LE(relative_error(it->second, want), bound) << "parameter '" << param << "'";
      ++compared;
    }
    EXPECT_GT(compared, 0);
  }

  static test::TempDir* dir_;
  static bool script_ok_;
};

test::TempDir* TorchTrainingOracle::dir_ = nullptr;
bool TorchTrainingOracle::script_ok_ = false;

TEST_F(TorchTrainingOracle, SgdWithMomentumThreeSteps) {
  passes::OptimizerOptions o;
  o.kind = "sgd";
  o.lr = 0.1;
  o.momentum = 0.9;
  for (const Model& m : oracle::example_models()) check(m, "sgd", o);
}

TEST_F(TorchTrainingOracle, AdamWThreeSteps) {
  passes::OptimizerOptions o;
  o.kind = "adamw";
  o.lr = 1e-3;
  o.weight_decay = 0.01;
  for (const Model& m : oracle::example_models()) check(m, "adamw", o);
}

}  // namespace
}  // namespace ampc
