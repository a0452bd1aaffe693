// `ampc bench --against`: two models timed in turns in one process. Times are never checked
// (a measurement, not a test); what is checked is which model each side's numbers belong to
// (its step count, as `ampc bench` of that model alone reports it), how the iterations fall
// into turns, and the refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "runtime/io/npy.h"
#include "runtime/tensor.h"
#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {
using json = nlohmann::json;
using ::testing::HasSubstr;

json bench_json(std::vector<std::string> args) {
  args.insert(args.begin(), "bench");
  args.insert(args.end(), {"--format", "json", "--warmup", "1"});
  return json::parse(expect_success(args));
}

int steps_alone(const std::string& model) {
  return bench_json({source_path(model).string(), "--iterations", "1"})["steps"].get<int>();
}

TEST(BenchCli, AgainstTimesBothModelsAndPairsTheirTurns) {
  const std::string mlp = source_path("models/mlp.onnx").string();
  const std::string gpt = source_path("models/gpt.onnx").string();
  const json j = bench_json({mlp, "--against", gpt, "--iterations", "5", "--turn", "2"});
  const int mlp_steps = steps_alone("models/mlp.onnx"), gpt_steps = steps_alone("models/gpt.onnx");
  ASSERT_NE(mlp_steps, gpt_steps);
  EXPECT_EQ(j["model"], mlp);
  EXPECT_EQ(j["steps"].get<int>(), mlp_steps);
  EXPECT_EQ(j["against"]["model"], gpt);
  EXPECT_EQ(j["against"]["steps"].get<int>(), gpt_steps);
  for (const json& side : {j, j["against"]}) {
    EXPECT_EQ(side["iterations"].get<int>(), 5);
    EXPECT_LE(side["min_ms"].get<double>(), side["p10_ms"].get<double>());
    EXPECT_LE(side["p10_ms"].get<double>(), side["median_ms"].get<double>());
    EXPECT_LE(side["median_ms"].get<double>(), side["p90_ms"].get<double>());
  }
  // 5 timed iterations in turns of 2: 2, 2 and 1, so three pairs of turns.
  const json& r = j["paired_ratio"];
  EXPECT_EQ(r["turn"].get<int>(), 2);
  EXPECT_EQ(r["pairs"].get<int>(), 3);
  EXPECT_GT(r["p10"].get<double>(), 0.0);
  EXPECT_LE(r["p10"].get<double>(), r["median"].get<double>());
  EXPECT_LE(r["median"].get<double>(), r["p90"].get<double>());
}

TEST(BenchCli, TextNamesTheRatioSecondOverFirst) {
  const std::string mlp = source_path("models/mlp.onnx").string();
  const std::string gpt = source_path("models/gpt.onnx").string();
  const std::string out = expect_success(
      {"bench", mlp, "--against", gpt, "--iterations", "2", "--warmup", "0", "--turn", "1"});
  EXPECT_THAT(out, HasSubstr(gpt + " / " + mlp + ", turns of 1 iterations, per pair of turns"));
}

// models/mlp.onnx has inputs x and y, models/gpt.onnx tokens and targets: each --input goes to
// the model that has it (the other's inputs are synthesised), and a name that neither model has
// is refused, as one that a single model lacks.
TEST(BenchCli, EachInputGoesToTheModelThatHasIt) {
  TempDir dir;
  rt::Tensor x(DType::kFloat32, {16, 64});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 0.01f * static_cast<float>(i % 9);
  rt::Tensor y(DType::kInt64, {16});
  for (int64_t i = 0; i < y.numel(); ++i) y.data<int64_t>()[i] = i % 10;
  rt::io::write_npy(x, (dir / "x.npy").string());
  rt::io::write_npy(y, (dir / "y.npy").string());
  const std::string mlp = source_path("models/mlp.onnx").string();
  const std::string gpt = source_path("models/gpt.onnx").string();
  const std::string x_spec = "x=" + (dir / "x.npy").string();
  const std::string y_spec = "y=" + (dir / "y.npy").string();
  // Both orders: the given inputs belong to the first model, then to the second.
  for (const auto& [first, second] : {std::pair{gpt, mlp}, std::pair{mlp, gpt}}) {
    const json j = bench_json({first, "--against", second, "--input", x_spec, "--input", y_spec,
                               "--iterations", "2", "--turn", "1"});
    EXPECT_EQ(j["model"], first);
    EXPECT_EQ(j["against"]["model"], second);
    EXPECT_EQ(j["paired_ratio"]["pairs"].get<int>(), 2);
  }
  const std::string z_spec = "z=" + (dir / "x.npy").string();
  EXPECT_THAT(expect_user_error({"bench", mlp, "--against", gpt, "--input", z_spec}),
              HasSubstr("--input 'z': neither model has an input of that name"));
  EXPECT_THAT(expect_user_error({"bench", mlp, "--input", z_spec}),
              HasSubstr("--input 'z': " + mlp + " has no input of that name"));
}

// --profile with --against: each side's op types cover exactly its own plan's steps (their step
// counts add up to that model's), and the text puts the two side by side.
TEST(BenchCli, ProfileWithAgainstProfilesEachModel) {
  const std::string mlp = source_path("models/mlp.onnx").string();
  const std::string gpt = source_path("models/gpt.onnx").string();
  const json j = bench_json(
      {mlp, "--against", gpt, "--profile", "--iterations", "2", "--turn", "1", "--slowest", "2"});
  for (const json& side : {j, j["against"]}) {
    int steps = 0;
    for (const json& op : side["profile"]) steps += op["steps"].get<int>();
    EXPECT_EQ(steps, side["steps"].get<int>()) << side["model"];
    EXPECT_EQ(side["slowest_steps"].size(), 2u);
  }
  const std::string text = expect_success({"bench", mlp, "--against", gpt, "--profile",
                                           "--iterations", "2", "--warmup", "0", "--turn", "1"});
  EXPECT_THAT(text, HasSubstr("side by side (" + mlp + " | " + gpt + " | second / first)"));
}

TEST(BenchCli, RefusesAnEmptyTurn) {
  const std::string mlp = source_path("models/mlp.onnx").string();
  EXPECT_THAT(expect_user_error({"bench", mlp, "--against", mlp, "--turn", "0"}),
              HasSubstr("--turn must be at least 1"));
}

}  // namespace
}  // namespace ampc::testing
