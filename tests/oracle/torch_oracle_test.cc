// PyTorch oracle: the forward loss that ampc computes (compile_file + the CPU Executor) for
// models/{mlp,cnn,gpt}.onnx on the first batch of their data equals the loss that PyTorch
// computes from the same ONNX initializers with its own functional ops
// (tests/oracle/torch_forward_oracle.py, run with Debian's Python; it also writes the input
// batches as .npy), within rtol 1e-5, atol 1e-6.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"
#include "runtime/io/npy.h"
#include "tests/support/temp_dir.h"

namespace ampc {
namespace {
namespace fs = std::filesystem;

constexpr double kRtol = 1e-5;
constexpr double kAtol = 1e-6;

using ampc::test::TempDir;

struct Expected {
  double loss64 = NAN;  // PyTorch in float64: the reference
  double loss32 = NAN;  // PyTorch in float32, for the report
};

struct Model {
  const char* name;
  std::vector<const char*> inputs;
};

const Model kModels[] = {
    {"mlp", {"x", "y"}},
    {"cnn", {"x", "y"}},
    {"gpt", {"tokens", "targets"}},
};

// One Python run for all three models (importing torch dominates the time).
TEST(TorchOracle, ForwardLossOfTheExampleModelsMatchesPyTorch) {
  TempDir dir;
  const std::string src = AMPC_SOURCE_DIR;
  const std::string cmd = "/usr/bin/python3 '" + src +
                          "/tests/oracle/torch_forward_oracle.py' --models-dir '" + src +
                          "/models' --out '" + dir.path().string() + "'";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the oracle script failed: " << cmd;

  std::map<std::string, Expected> expected;
  std::ifstream in(dir.path() / "expected.txt");
  std::string name;
  Expected e;
  while (in >> name >> e.loss64 >> e.loss32) expected[name] = e;
  ASSERT_EQ(expected.size(), std::size(kModels)) << "expected.txt is incomplete";

  for (const Model& m : kModels) {
    SCOPED_TRACE(m.name);
    ASSERT_TRUE(expected.count(m.name));
    const Expected& want = expected[m.name];
    plan::Plan plan = compiler::compile_file(src + "/models/" + m.name + ".onnx", {});
    rt::cpu::Executor executor(std::move(plan));
    std::map<std::string, rt::Tensor> feeds;
    for (const char* input : m.inputs) {
      feeds[input] =
          rt::io::read_npy((dir.path() / (std::string(m.name) + "_" + input + ".npy")).string());
    }
    const auto outputs = executor.run(feeds);
    ASSERT_EQ(outputs.size(), 1u);
    const rt::Tensor& loss = outputs.at("loss");
    ASSERT_EQ(loss.dtype(), DType::kFloat32);
    ASSERT_EQ(loss.numel(), 1);
    const double got = loss.data<float>()[0];
    EXPECT_LE(std::fabs(got - want.loss64), kAtol + kRtol * std::fabs(want.loss64))
        << "ampc " << got << ", PyTorch float64 " << want.loss64 << " (float32 " << want.loss32
        << ")";
    // A second run on the same executor gives the same bits (no state leaks between runs).
    EXPECT_EQ(executor.run(feeds).at("loss").data<float>()[0], loss.data<float>()[0]);
    std::printf("%s: ampc %.9g  torch f64 %.9g  torch f32 %.9g  rel.err %.2e\n", m.name, got,
                want.loss64, want.loss32, std::fabs(got - want.loss64) / std::fabs(want.loss64));
  }
}

}  // namespace
}  // namespace ampc
