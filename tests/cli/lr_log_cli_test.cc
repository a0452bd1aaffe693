// The lr of `ampc train --log`: the one the plan was compiled with (SGD and Adam at a
// non-default --lr, from the .onnx and from a compiled .plan), and with --lr-schedule the
// one each step used, equal to torch.optim.lr_scheduler's (tests/oracle/
// torch_training_oracle.py --schedules), advancing on steps the loss scaler skipped as
// PyTorch's scheduler.step() does. And the schedule and group options' refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "runtime/io/npy.h"
#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {
using ::testing::HasSubstr;

std::vector<std::string> train_args(const std::string& model, const std::filesystem::path& log,
                                    std::vector<std::string> more) {
  std::vector<std::string> args = {
      "train",   model, "--data", source_path("models/data/digits.npz").string(),
      "--steps", "3",   "--log",  log.string()};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

void expect_logged_lr(const std::filesystem::path& log, double lr) {
  const auto lines = read_log(log);
  ASSERT_FALSE(lines.empty());
  for (const auto& j : lines) EXPECT_NEAR(j.at("lr").get<double>(), lr, lr * 1e-6) << j.dump();
}

TEST(LrLog, CompiledLrOfSgdAndAdam) {
  TempDir dir;
  const std::string mlp = source_path("models/mlp.onnx").string();
  for (const auto& [optimizer, lr] : {std::pair{"sgd", "0.05"}, std::pair{"adam", "0.0003"}}) {
    SCOPED_TRACE(optimizer);
    const auto plan = dir / (std::string(optimizer) + ".plan");
    expect_success(
        {"compile", mlp, "--train", "--optimizer", optimizer, "--lr", lr, "-o", plan.string()});
    expect_success(train_args(plan.string(), dir / "plan.jsonl", {}));
    expect_logged_lr(dir / "plan.jsonl", std::stod(lr));
    expect_success(train_args(mlp, dir / "onnx.jsonl", {"--optimizer", optimizer, "--lr", lr}));
    expect_logged_lr(dir / "onnx.jsonl", std::stod(lr));
  }
}

TEST(LrLog, ScheduledLrMatchesTorchAndAdvancesOnSkippedSteps) {
  TempDir dir;
  const std::string cmd = "/usr/bin/python3 '" +
                          source_path("tests/oracle/torch_training_oracle.py").string() +
                          "' --models-dir '" + source_path("models").string() + "' --out '" +
                          dir.path().string() + "' --schedules 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "the oracle script failed";
  const rt::Tensor want = rt::io::read_npy((dir / "mlp.adamw_cosine.lr.npy").string());
  // fp16 with an initial scale the gradients overflow at: the first steps are skipped.
  std::vector<std::string> args =
      train_args(source_path("models/mlp.onnx").string(), dir / "log.jsonl",
                 {"--precision",
                  "fp16",
                  "--init-scale",
                  "1e6",
                  "--optimizer",
                  "adamw",
                  "--lr",
                  "1e-2",
                  "--weight-decay",
                  "0.1",
                  "--lr-schedule",
                  "cosine",
                  "--warmup-steps",
                  "2",
                  "--warmup-start-factor",
                  "0.1",
                  "--total-steps",
                  "6",
                  "--no-decay",
                  "*.bias",
                  "--no-decay",
                  "ln1.*",
                  "--lr-mult",
                  "fc2.*=0.5"});
  args[5] = std::to_string(want.numel());  // --steps
  expect_success(args);
  const auto lines = read_log(dir / "log.jsonl");
  ASSERT_EQ(static_cast<int64_t>(lines.size()), want.numel());
  int skipped = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const double lr = want.data<double>()[i];
    EXPECT_NEAR(lines[i].at("lr").get<double>(), lr, lr * 1e-6) << lines[i].dump();
    skipped += lines[i].at("skipped").get<bool>();
  }
  EXPECT_GT(skipped, 0) << "no step was skipped: the test does not test skipping";
  EXPECT_LT(skipped, static_cast<int>(lines.size()));
}

TEST(LrLog, ScheduleAndGroupRefusals) {
  TempDir dir;
  const std::string mlp = source_path("models/mlp.onnx").string();
  const auto out = (dir / "p.plan").string();
  auto refuse = [&](std::vector<std::string> more, const std::string& message) {
    std::vector<std::string> args = {"compile", mlp, "--train", "-o", out};
    args.insert(args.end(), more.begin(), more.end());
    EXPECT_THAT(expect_user_error(args), HasSubstr(message));
  };
  refuse({"--lr-schedule", "cosine", "--warmup-steps", "5"}, "needs --total-steps greater");
  refuse({"--lr-schedule", "step"}, "needs --step-size");
  refuse({"--lr-schedule", "exp"}, "expected constant, step, cosine or linear");
  refuse({"--lr-mult", "fc1.*"}, "expected PATTERN=F");
  refuse({"--no-decay", "conv*"}, "--no-decay 'conv*' matches no trained parameter");
  refuse({"--lr-mult", "nothing=2"}, "matches no trained parameter");
}

}  // namespace
}  // namespace ampc::testing
