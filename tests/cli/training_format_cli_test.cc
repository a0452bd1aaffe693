// `ampc compile --train --emit-onnx FILE`, run as a separate process on models/mlp.onnx: it
// writes the plan and the training step in ONNX's training format, which passes ONNX's full
// check and compiles again with --train (but not with optimizer options, which it already
// fixed). --emit-onnx without --train is a usage error (exit 2), a wrong update_binding an
// error naming the binding (exit 1); neither leaves a file behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "frontend/onnx/export.h"
#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {
namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class TrainingFormatCli : public ::testing::Test {
 protected:
  // Compiles mlp.onnx for training with --emit-onnx; returns the ONNX file's path.
  fs::path emit() {
    const fs::path onnx_file = dir_ / "mlp_train.onnx";
    const RunResult r =
        run_ampc({"compile", source_path("models/mlp.onnx").string(), "--train", "--momentum",
                  "0.9", "-o", (dir_ / "mlp.plan").string(), "--emit-onnx", onnx_file.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    return onnx_file;
  }

  // Expects a failure with status `code`, one stderr line containing `what`, no output file.
  void fails(const std::vector<std::string>& args, int code, const std::string& what,
             const fs::path& not_written) {
    const RunResult r = run_ampc(args);
    EXPECT_EQ(r.term_signal, 0) << "crashed";
    EXPECT_EQ(r.exit_code, code) << r.err;
    EXPECT_THAT(r.err, HasSubstr(what));
    if (code == 1) {
      EXPECT_THAT(r.err, StartsWith("ampc: error: "));
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
    EXPECT_FALSE(fs::exists(not_written)) << not_written;
  }

  TempDir dir_;
};

TEST_F(TrainingFormatCli, EmitsACheckedTrainingModelThatCompilesAgain) {
  const fs::path onnx_file = emit();
  EXPECT_TRUE(fs::exists(dir_ / "mlp.plan"));
  const onnx::ModelProto proto = read_proto(onnx_file);
  ASSERT_EQ(proto.training_info_size(), 1);
  EXPECT_GT(proto.training_info(0).update_binding_size(), 0);
  EXPECT_NO_THROW(onnx_io::check_model(proto));

  const RunResult r =
      run_ampc({"compile", onnx_file.string(), "--train", "-o", (dir_ / "again.plan").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir_ / "again.plan"));

  fails(
      {"compile", onnx_file.string(), "--train", "--lr", "0.5", "-o", (dir_ / "lr.plan").string()},
      1, "already holds its training step", dir_ / "lr.plan");
}

TEST_F(TrainingFormatCli, EmitOnnxWithoutTrainIsAUsageError) {
  fails({"compile", source_path("models/mlp.onnx").string(), "-o", (dir_ / "p.plan").string(),
         "--emit-onnx", (dir_ / "m.onnx").string()},
        2, "--emit-onnx requires --train", dir_ / "m.onnx");
  EXPECT_FALSE(fs::exists(dir_ / "p.plan"));
}

TEST_F(TrainingFormatCli, WrongUpdateBindingIsAClearError) {
  onnx::ModelProto proto = read_proto(emit());
  proto.mutable_training_info(0)->mutable_update_binding(0)->set_key("x");
  const fs::path bad = dir_ / "bad.onnx";
  write_proto(proto, bad);
  fails({"compile", bad.string(), "--train", "-o", (dir_ / "bad.plan").string()}, 1,
        "update_binding 'x' <- '", dir_ / "bad.plan");
}

}  // namespace
}  // namespace ampc::testing
