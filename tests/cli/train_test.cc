// `ampc train` end to end, as a user runs it: the README's main job (the MLP reaches 95%
// held-out accuracy on the digits), the gpt learning its task, bit-exact resume from a
// checkpoint, the per-step log, checkpoints as valid ONNX models, and clear refusals of
// bad data and option combinations before the first step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "runtime/io/checkpoint.h"
#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {
using ::testing::HasSubstr;

std::vector<std::string> mlp_train(const std::filesystem::path& data, int steps) {
  return {"train",
          source_path("models/mlp.onnx").string(),
          "--data",
          data.string(),
          "--steps",
          std::to_string(steps),
          "--optimizer",
          "adamw",
          "--lr",
          "1e-3",
          "--shuffle",
          "--seed",
          "3"};
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(Train, MlpReachesNinetyFivePercentHeldOut) {
  TempDir dir;
  const std::string out =
      expect_success({"train", source_path("models/mlp.onnx").string(), "--data",
                      source_path("models/data/digits.npz").string(), "--holdout", "0.2", "--steps",
                      "600", "--optimizer", "adam", "--lr", "1e-3", "--shuffle", "--seed", "1"});
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m,
                                std::regex("held-out: (\\d+) samples: loss ([0-9.]+), "
                                           "accuracy ([0-9.]+)%")))
      << out;
  EXPECT_EQ(std::stoi(m[1]), 359);  // 359 held out: 11 batches of 32 and a masked one of 7
  EXPECT_GE(std::stod(m[3]), 95.0) << out;
}

TEST(Train, GptLearnsItsTask) {
  TempDir dir;
  expect_success({"train", source_path("models/gpt.onnx").string(), "--data",
                  source_path("models/data/seqtask.npz").string(), "--steps", "600", "--optimizer",
                  "adam", "--lr", "3e-3", "--shuffle", "--log", (dir / "log.jsonl").string()});
  const auto log = read_log(dir / "log.jsonl");
  ASSERT_EQ(log.size(), 600u);
  double last = 0;
  for (size_t i = log.size() - 20; i < log.size(); ++i) last += log[i]["loss"].get<double>() / 20;
  EXPECT_LT(last, 0.1 * log[0]["loss"].get<double>());
}

TEST(Train, LogHasOneObjectPerStep) {
  TempDir dir;
  expect_success(with(mlp_train(source_path("models/data/digits.npz"), 5),
                      {"--log", (dir / "log.jsonl").string()}));
  const auto log = read_log(dir / "log.jsonl");
  ASSERT_EQ(log.size(), 5u);
  for (size_t i = 0; i < log.size(); ++i) {
    EXPECT_EQ(log[i]["step"], i + 1);
    EXPECT_TRUE(log[i]["loss"].is_number());
    EXPECT_FLOAT_EQ(log[i]["lr"].get<float>(), 1e-3f);
    EXPECT_EQ(log[i]["scale"], 1.0);
    EXPECT_EQ(log[i]["skipped"], false);
    EXPECT_TRUE(log[i]["grad_norm"].is_null());
    EXPECT_GT(log[i]["samples_per_s"].get<double>(), 0);
  }
}

// N steps, checkpoint, resume for M steps == N + M steps in one run, bit for bit: every
// parameter, moment, step counter, and the data position.
TEST(Train, ResumeIsBitExact) {
  TempDir dir;
  const auto data = source_path("models/data/digits.npz");
  expect_success(with(mlp_train(data, 50), {"--checkpoint", (dir / "full.onnx").string()}));
  expect_success(with(mlp_train(data, 20),
                      {"--checkpoint", (dir / "half.onnx").string(), "--checkpoint-every", "7"}));
  expect_success(with(mlp_train(data, 30),
                      {"--resume", (dir / "half.onnx").string(), "--checkpoint",
                       (dir / "resumed.onnx").string(), "--log", (dir / "log.jsonl").string()}));
  const auto full = rt::io::read_checkpoint((dir / "full.onnx").string());
  const auto resumed = rt::io::read_checkpoint((dir / "resumed.onnx").string());
  EXPECT_EQ(resumed.progress.step, 50);
  EXPECT_EQ(resumed.progress.data_position, full.progress.data_position);
  ASSERT_EQ(full.initializers.size(), resumed.initializers.size());
  int trained = 0;
  for (const auto& [name, want] : full.initializers) {
    const auto& got = resumed.initializers.at(name);
    ASSERT_EQ(got.type_str(), want.type_str()) << name;
    EXPECT_EQ(bytes_of(got), bytes_of(want)) << name;
    trained += name.find("exp_avg") != std::string::npos;
  }
  EXPECT_GT(trained, 0);
  const auto log = read_log(dir / "log.jsonl");
  ASSERT_EQ(log.size(), 30u);
  EXPECT_EQ(log.front()["step"], 21);
}

// A model in ONNX's training format (`ampc compile --emit-onnx`) trains as it is, bit for bit
// like the original model compiled with the same options.
TEST(Train, TrainsAModelInOnnxTrainingFormat) {
  TempDir dir;
  const auto data = source_path("models/data/digits.npz");
  expect_success({"compile", source_path("models/mlp.onnx").string(), "--train", "--optimizer",
                  "adamw", "--lr", "1e-3", "-o", (dir / "mlp.plan").string(), "--emit-onnx",
                  (dir / "mlp.train.onnx").string()});
  expect_success(with(mlp_train(data, 5), {"--checkpoint", (dir / "direct.onnx").string()}));
  expect_success({"train", (dir / "mlp.train.onnx").string(), "--data", data.string(), "--steps",
                  "5", "--shuffle", "--seed", "3", "--checkpoint",
                  (dir / "emitted.onnx").string()});
  const auto direct = rt::io::read_checkpoint((dir / "direct.onnx").string());
  const auto emitted = rt::io::read_checkpoint((dir / "emitted.onnx").string());
  int compared = 0;
  for (const auto& [name, want] : direct.initializers) {
    ASSERT_TRUE(emitted.initializers.count(name)) << name;
    EXPECT_EQ(bytes_of(emitted.initializers.at(name)), bytes_of(want)) << name;
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(emitted.initializers.size()));
}

TEST(Train, CheckpointIsAnInferenceModelWithTrainedWeights) {
  TempDir dir;
  expect_success(with(mlp_train(source_path("models/data/digits.npz"), 100),
                      {"--checkpoint", (dir / "ckpt.onnx").string()}));
  const onnx::ModelProto ckpt = read_proto(dir / "ckpt.onnx");
  ASSERT_EQ(ckpt.training_info_size(), 1);
  EXPECT_GT(ckpt.training_info(0).update_binding_size(), 0);
  // ONNX's own checker (full check) accepts it.
  const std::string check =
      "/usr/bin/python3 -c \"import onnx, sys; onnx.checker.check_model("
      "onnx.load(sys.argv[1]), full_check=True)\" '" +
      (dir / "ckpt.onnx").string() + "'";
  EXPECT_EQ(std::system(check.c_str()), 0);
  // Its inference graph, run on training data, has a lower loss than the untrained model.
  const std::string extract =
      "/usr/bin/python3 -c \"import numpy as np, sys; z = np.load(sys.argv[1]); "
      "np.save(sys.argv[2] + '/x.npy', z['x'][:32]); np.save(sys.argv[2] + '/y.npy', "
      "z['y'][:32])\" '" +
      source_path("models/data/digits.npz").string() + "' '" + dir.path().string() + "'";
  ASSERT_EQ(std::system(extract.c_str()), 0);
  auto loss_of = [&](const std::filesystem::path& model) {
    const std::string out =
        expect_success({"run", model.string(), "--input", "x=" + (dir / "x.npy").string(),
                        "--input", "y=" + (dir / "y.npy").string()});
    std::smatch m;
    EXPECT_TRUE(std::regex_search(out, m, std::regex("loss: f32\\[\\] = \\[([0-9.e+-]+)\\]")))
        << out;
    return m.empty() ? 0.0 : std::stod(m[1]);
  };
  EXPECT_LT(loss_of(dir / "ckpt.onnx"), 0.5 * loss_of(source_path("models/mlp.onnx")));
}

TEST(Train, RefusesBadDataBeforeTheFirstStep) {
  TempDir dir;
  const auto log = (dir / "log.jsonl").string();
  // The cnn wants x as [32,1,8,8]; the mlp's data has [N,64].
  EXPECT_THAT(expect_user_error({"train", source_path("models/cnn.onnx").string(), "--data",
                                 source_path("models/data/digits.npz").string(), "--log", log}),
              HasSubstr("'x'"));
  EXPECT_FALSE(std::filesystem::exists(log));
  // No array named like the gpt's inputs.
  EXPECT_THAT(expect_user_error({"train", source_path("models/gpt.onnx").string(), "--data",
                                 source_path("models/data/digits.npz").string()}),
              HasSubstr("has no array"));
  EXPECT_THAT(expect_user_error(mlp_train(dir / "missing.npz", 5)), HasSubstr("missing.npz"));
}

TEST(Train, RefusesContradictoryOptions) {
  TempDir dir;
  const auto data = source_path("models/data/digits.npz");
  EXPECT_THAT(expect_user_error(with(mlp_train(data, 5), {"--checkpoint-every", "2"})),
              HasSubstr("--checkpoint-every needs --checkpoint"));
  EXPECT_THAT(
      expect_user_error(with(mlp_train(data, 5), {"--holdout", "0.2", "--eval", data.string()})),
      HasSubstr("give one"));
  // A compiled plan cannot take options that would change the compiled step.
  expect_success({"compile", source_path("models/mlp.onnx").string(), "--train", "-o",
                  (dir / "mlp.plan").string()});
  EXPECT_THAT(expect_user_error({"train", (dir / "mlp.plan").string(), "--data", data.string(),
                                 "--lr", "0.1", "--precision", "fp16"}),
              HasSubstr("--lr, --precision: '"));
  // Also the data-parallel options that shape the compiled step; `ampc compile` refuses them
  // without --data-parallel.
  EXPECT_THAT(expect_user_error({"train", (dir / "mlp.plan").string(), "--data", data.string(),
                                 "--reduce-dtype", "fp16", "--bucket-kib", "4"}),
              HasSubstr("--reduce-dtype, --bucket-kib: '"));
  EXPECT_THAT(expect_user_error({"compile", source_path("models/mlp.onnx").string(), "--train",
                                 "--reduce-dtype", "bf16", "-o", (dir / "x.plan").string()}),
              HasSubstr("--reduce-dtype: data-parallel options, but no --data-parallel"));
  // A checkpoint of another model does not fit.
  expect_success({"train", source_path("models/cnn.onnx").string(), "--data",
                  source_path("models/data/digits_images.npz").string(), "--steps", "1",
                  "--checkpoint", (dir / "cnn.onnx").string()});
  EXPECT_THAT(
      expect_user_error(with(mlp_train(data, 5), {"--resume", (dir / "cnn.onnx").string()})),
      HasSubstr("does not fit this plan"));
}

}  // namespace
}  // namespace ampc::testing
