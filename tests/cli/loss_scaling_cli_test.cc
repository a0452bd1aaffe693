// `ampc train` / `ampc compile` with the loss scaler's options, as a user runs them: the log's
// scale / skipped / grad_norm, the end-of-run summary, the --max-consecutive-skips guard,
// static and none modes, --skip-nonfinite without scaling, --emit-onnx with the skip as a
// Where on amp.found_inf and the scaler's state bound, and refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {
using ::testing::HasSubstr;
using ::testing::Not;

// The first `steps` batches of the digits, with a NaN in one sample of each batch listed in
// `bad` (1-based steps; batch size 32, file order).
std::filesystem::path poisoned(const TempDir& dir, int steps, const std::string& bad) {
  const auto path = dir / "poisoned.npz";
  const std::string cmd =
      "/usr/bin/python3 -c \"import numpy as np, sys; d = np.load(sys.argv[1]); n = " +
      std::to_string(steps) +
      " * 32; x = d['x'][:n].copy(); y = d['y'][:n].copy()\n"
      "for s in [" +
      bad + "]: x[(s - 1) * 32 + 1, 2] = np.nan\nnp.savez(sys.argv[2], x=x, y=y)\" '" +
      source_path("models/data/digits.npz").string() + "' '" + path.string() + "'";
  const int status = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd;
  return path;
}

std::vector<std::string> train(const std::filesystem::path& data, int steps,
                               std::vector<std::string> more) {
  std::vector<std::string> args = {"train",       source_path("models/mlp.onnx").string(),
                                   "--data",      data.string(),
                                   "--steps",     std::to_string(steps),
                                   "--optimizer", "adam"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(LossScalingCli, DynamicLogAndSummary) {
  TempDir dir;
  const auto data = poisoned(dir, 6, "2, 3");
  const auto log = dir / "log.jsonl";
  const std::string out = expect_success(
      train(data, 6, {"--loss-scale", "dynamic", "--growth-interval", "2", "--log", log.string()}));
  EXPECT_THAT(out, HasSubstr("loss scaling: 2 of 6 steps skipped (non-finite gradients), "
                             "final scale 32768"));
  const auto lines = read_log(log);
  ASSERT_EQ(lines.size(), 6u);
  const std::vector<double> scale = {65536, 65536, 32768, 16384, 16384, 32768};
  const std::vector<bool> skipped = {false, true, true, false, false, false};
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["scale"].get<double>(), scale[i]) << i;
    EXPECT_EQ(lines[i]["skipped"].get<bool>(), skipped[i]) << i;
    EXPECT_TRUE(lines[i]["grad_norm"].is_null());
    EXPECT_EQ(lines[i]["loss"].is_null(), skipped[i]) << "a NaN loss is logged as null";
  }
}

TEST(LossScalingCli, GuardStopsAfterConsecutiveSkips) {
  TempDir dir;
  const auto data = poisoned(dir, 8, "3, 4, 5, 6, 7, 8");
  const std::string err = expect_user_error(
      train(data, 8, {"--loss-scale", "dynamic", "--max-consecutive-skips", "3"}));
  EXPECT_THAT(err, HasSubstr("3 consecutive steps skipped (steps 3 to 5)"));
  EXPECT_THAT(err, HasSubstr("the loss scale is now 8192"));
  EXPECT_THAT(err, HasSubstr("the loss itself is nan"));
  // 0 turns the guard off.
  expect_success(train(data, 8, {"--loss-scale", "dynamic", "--max-consecutive-skips", "0"}));
}

TEST(LossScalingCli, StaticNoneAndSkipNonFinite) {
  TempDir dir;
  const auto data = poisoned(dir, 4, "2");
  const auto log = dir / "log.jsonl";
  const std::string out =
      expect_success(train(data, 4, {"--loss-scale", "static:1024", "--log", log.string()}));
  EXPECT_THAT(out, HasSubstr("1 of 4 steps skipped (non-finite gradients), final scale 1024"));
  for (const auto& l : read_log(log)) EXPECT_EQ(l["scale"].get<double>(), 1024);
  EXPECT_TRUE(read_log(log)[1]["skipped"].get<bool>());

  // Without scaling and without the check, a non-finite loss stops training as before.
  EXPECT_THAT(expect_user_error(train(data, 4, {"--loss-scale", "none"})),
              HasSubstr("step 2: the loss is"));

  const std::string skip = expect_success(
      train(data, 4, {"--skip-nonfinite", "--log", log.string(), "--log-grad-norm"}));
  EXPECT_THAT(skip, HasSubstr("1 of 4 steps skipped"));
  EXPECT_THAT(skip, Not(HasSubstr("final scale")));
  const auto lines = read_log(log);
  ASSERT_EQ(lines.size(), 4u);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["scale"].get<double>(), 1.0);
    EXPECT_EQ(lines[i]["skipped"].get<bool>(), i == 1);
    EXPECT_EQ(lines[i]["grad_norm"].is_number(), i != 1) << "NaN norm logged as null";
  }
}

TEST(LossScalingCli, Fp32DefaultLogIsUnchanged) {
  TempDir dir;
  const auto log = dir / "log.jsonl";
  const std::string out =
      expect_success(train(source_path("models/data/digits.npz"), 2, {"--log", log.string()}));
  EXPECT_THAT(out, Not(HasSubstr("loss scaling")));
  for (const auto& l : read_log(log)) {
    EXPECT_EQ(l["scale"].get<double>(), 1.0);
    EXPECT_FALSE(l["skipped"].get<bool>());
    EXPECT_TRUE(l["grad_norm"].is_null());
  }
}

TEST(LossScalingCli, EmittedTrainingStepSkipsVisiblyAndTrains) {
  TempDir dir;
  const auto onnx_file = dir / "step.onnx";
  expect_success({"compile", source_path("models/mlp.onnx").string(), "--train", "--optimizer",
                  "sgd", "--momentum", "0.9", "--loss-scale", "dynamic", "--clip-grad-norm", "1",
                  "-o", (dir / "p.plan").string(), "--emit-onnx", onnx_file.string()});
  const onnx::ModelProto m = read_proto(onnx_file);
  ASSERT_EQ(m.training_info_size(), 1);
  std::map<std::string, std::string> binding;
  for (const auto& b : m.training_info(0).update_binding()) binding[b.key()] = b.value();
  EXPECT_TRUE(binding.count("amp.scale"));
  EXPECT_TRUE(binding.count("amp.growth_tracker"));
  std::map<std::string, const onnx::NodeProto*> producer;
  for (const auto& n : m.training_info(0).algorithm().node())
    for (const auto& o : n.output()) producer[o] = &n;
  ASSERT_TRUE(producer.count(binding.at("fc1.weight")));
  EXPECT_EQ(producer.at(binding.at("fc1.weight"))->op_type(), "Where");
  EXPECT_EQ(producer.at(binding.at("fc1.weight"))->input(0), "amp.found_inf");
  // A fresh process imports the ampc ops and trains the model as it is, logging grad_norm.
  const auto data = poisoned(dir, 3, "2");
  const auto log = dir / "log.jsonl";
  expect_success({"train", onnx_file.string(), "--data", data.string(), "--steps", "3", "--log",
                  log.string()});
  const auto lines = read_log(log);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(lines[0]["grad_norm"].is_number());
  EXPECT_TRUE(lines[1]["skipped"].get<bool>());
  EXPECT_EQ(lines[2]["scale"].get<double>(), 32768);
}

TEST(LossScalingCli, Refusals) {
  TempDir dir;
  const auto digits = source_path("models/data/digits.npz");
  EXPECT_THAT(expect_user_error(train(digits, 1, {"--loss-scale", "always"})),
              HasSubstr("expected dynamic, static:S or none"));
  EXPECT_THAT(expect_user_error(train(digits, 1, {"--loss-scale", "none", "--max-scale", "8"})),
              HasSubstr("bound the dynamic loss scale"));
  const auto onnx_file = dir / "step.onnx";
  expect_success({"compile", source_path("models/mlp.onnx").string(), "--train", "-o",
                  (dir / "p.plan").string(), "--emit-onnx", onnx_file.string()});
  EXPECT_THAT(expect_user_error({"train", onnx_file.string(), "--data", digits.string(), "--steps",
                                 "1", "--loss-scale", "dynamic"}),
              HasSubstr("already holds its training step"));
}

}  // namespace
}  // namespace ampc::testing
