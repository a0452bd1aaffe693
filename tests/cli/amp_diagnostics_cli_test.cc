// Issue 8 end to end through the `ampc` binary:
// - `ampc train --grad-stats F [--grad-stats-every K] [--activation-stats]`: one record per
//   tensor per recorded step (1, 1+K, ...), every parameter named by its layer;
// - `ampc report`: the underflow model of mixed_precision_train_test (loss x 1e-7, gradients
//   below fp16's smallest subnormal) trained in fp32 is reported as needing loss scaling, and
//   fp16 with the static scale the report proposes trains like fp32 (the bounds that test uses
//   for dynamic scaling); the pictures are SVG documents (parsed by Python's XML parser);
// - `ampc inspect --memory --device-memory SIZE`: the batch it reports compiles (by `ampc
//   compile --input-shape`, mlp; by a torch export at that batch, gpt) within SIZE and the
//   next batch does not;
// - `--half-inputs`: the plan's float input is fp16 and training matches the plan without it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "runtime/plan/plan_file.h"
#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {

int python(const std::string& args) {
  const int status = std::system(("/usr/bin/python3 " + args).c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Checks an SVG document with Python's XML parser: root <svg>, at least `polylines`
// polylines, and `points` points in the first one when >= 0.
void expect_svg(const std::filesystem::path& f, int polylines, int points = -1) {
  const std::string check =
      "-c \"import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); "
      "ns='{http://www.w3.org/2000/svg}'; p = r.findall('.//'+ns+'polyline'); "
      "assert r.tag == ns+'svg', r.tag; assert len(p) >= " +
      std::to_string(polylines) +
      ", len(p); n = int(sys.argv[2]); "
      "assert n < 0 or len(p[0].get('points').split()) == n\" '" +
      f.string() + "' " + std::to_string(points);
  EXPECT_EQ(python(check), 0) << f;
}

TEST(GradStats, RecordsEveryTensorAtTheCadenceAndReportDrawsIt) {
  TempDir dir;
  expect_success({"train", source_path("models/mlp.onnx").string(), "--data",
                  source_path("models/data/digits.npz").string(), "--steps", "6", "--precision",
                  "fp16", "--optimizer", "adam", "--grad-stats", (dir / "stats.jsonl").string(),
                  "--grad-stats-every", "2", "--activation-stats", "--log",
                  (dir / "log.jsonl").string()});
  const auto records = read_log(dir / "stats.jsonl");
  std::map<std::string, std::set<int64_t>> steps;
  std::set<std::string> params;
  for (const auto& r : records) {
    steps[r["kind"].get<std::string>() + ":" + r["tensor"].get<std::string>()].insert(
        r["step"].get<int64_t>());
    if (r["kind"] == "gradient") {
      params.insert(r["tensor"]);
      EXPECT_EQ(r["scale"], 65536.0);
    }
    double sum = r["zero"].get<double>() + r["nonfinite"].get<double>();
    for (const char* c : {"flush", "subnormal", "normal", "overflow"})
      sum += r["unscaled"][c].get<double>();
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  EXPECT_EQ(params, (std::set<std::string>{"fc1.weight", "fc1.bias", "ln1.weight", "ln1.bias",
                                           "fc2.weight", "fc2.bias"}));
  for (const auto& [tensor, s] : steps) EXPECT_EQ(s, (std::set<int64_t>{1, 3, 5})) << tensor;
  EXPECT_GT(steps.size(), params.size());  // activations too

  const std::string text =
      expect_success({"report", (dir / "stats.jsonl").string(), "--out", (dir / "pics").string(),
                      "--log", (dir / "log.jsonl").string()});
  // Layers in network depth order: fc1 before ln1 before fc2.
  const auto fc1 = text.find("/fc1/Gemm"), ln1 = text.find("/ln1/"), fc2 = text.find("/fc2/Gemm");
  ASSERT_NE(fc1, std::string::npos);
  EXPECT_LT(fc1, ln1);
  EXPECT_LT(ln1, fc2);
  EXPECT_THAT(text, ::testing::HasSubstr("verdict: "));
  expect_svg(dir / "pics" / "loss.svg", 1, 6);
  expect_svg(dir / "pics" / "scale.svg", 1, 6);
  expect_svg(dir / "pics" / "gradient_ranges.svg", 0);
}

TEST(GradStats, RefusedWhereTheyCannotApply) {
  TempDir dir;
  EXPECT_THAT(expect_user_error({"train", source_path("models/mlp.onnx").string(), "--data",
                                 source_path("models/data/digits.npz").string(), "--steps", "1",
                                 "--activation-stats"}),
              ::testing::HasSubstr("--activation-stats needs --grad-stats"));
  expect_success({"compile", source_path("models/mlp.onnx").string(), "--train", "--target", "cpu",
                  "-o", (dir / "m.plan").string()});
  EXPECT_THAT(expect_user_error({"train", (dir / "m.plan").string(), "--data",
                                 source_path("models/data/digits.npz").string(), "--steps", "1",
                                 "--grad-stats", (dir / "s.jsonl").string()}),
              ::testing::HasSubstr("computes no range statistics"));
}

class UnderflowReport : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(python("'" AMPC_SOURCE_DIR "/tests/cli/make_underflow_model.py' '" +
                     dir_.path().string() + "'"),
              0);
  }
  std::vector<double> train(const std::string& tag, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"train",       (dir_ / "underflow.onnx").string(),
                                     "--data",      (dir_ / "underflow.npz").string(),
                                     "--steps",     "60",
                                     "--optimizer", "sgd",
                                     "--lr",        "1e6",
                                     "--log",       (dir_ / (tag + ".jsonl")).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    expect_success(args);
    std::vector<double> losses;
    for (const auto& j : read_log(dir_ / (tag + ".jsonl"))) losses.push_back(j["loss"]);
    return losses;
  }
  TempDir dir_;
};

TEST_F(UnderflowReport, NeedsScalingAndTheProposedStaticScaleTrains) {
  const auto fp32 =
      train("fp32", {"--grad-stats", (dir_ / "stats.jsonl").string(), "--grad-stats-every", "1"});
  ASSERT_EQ(fp32.size(), 60u);
  const auto j = nlohmann::json::parse(
      expect_success({"report", (dir_ / "stats.jsonl").string(), "--format", "json"}));
  EXPECT_TRUE(j["scaling_needed"].get<bool>());
  EXPECT_GT(j["flush_at_1"].get<double>(), 0.5);  // gradients around 1e-9..1e-7
  EXPECT_THAT(j["verdict"].get<std::string>(), ::testing::StartsWith("loss scaling needed"));
  ASSERT_TRUE(j["scale_log2"]["proposed"].is_number());
  const int k = j["scale_log2"]["proposed"];
  // Independently of the report: every recorded gradient stays finite in fp16 at 2^k.
  double max_abs = 0;
  for (const auto& r : read_log(dir_ / "stats.jsonl"))
    max_abs = std::max(max_abs, r["max_abs"].get<double>());
  EXPECT_LE(std::ldexp(max_abs, k), 65504.0);
  EXPECT_GE(k, 16) << "the gradients need at least 2^16 to leave the flush range";
  const auto scaled =
      train("scaled", {"--precision", "fp16", "--loss-scale",
                       "static:" + std::to_string(static_cast<long long>(std::ldexp(1.0, k)))});
  ASSERT_EQ(scaled.size(), 60u);
  for (size_t i = 0; i <= 40; i += 10)
    EXPECT_NEAR(scaled[i], fp32[i], 0.05 * fp32[i]) << "step " << i + 1;
  EXPECT_LT(scaled.back(), 0.2 * scaled.front());
}

// total = the regions of the plan's memory plan, from `ampc inspect PLAN --format json`.
int64_t plan_total(const std::string& plan) {
  const auto j = nlohmann::json::parse(expect_success({"inspect", plan, "--format", "json"}));
  return j["state_bytes"].get<int64_t>() + j["arena_bytes"].get<int64_t>() +
         j["constant_bytes"].get<int64_t>() + j["input_bytes"].get<int64_t>() +
         j["workspace_bytes"].get<int64_t>();
}

nlohmann::json memory_json(const std::string& model, const std::string& size) {
  return nlohmann::json::parse(
      expect_success({"inspect", model, "--memory", "--device-memory", size, "--format", "json"}));
}

TEST(BatchPlanner, MlpBatchFitsAndTheNextDoesNot) {
  TempDir dir;
  const int64_t budget = int64_t{40} << 20;
  const auto j = memory_json(source_path("models/mlp.onnx").string(), "40MiB");
  ASSERT_EQ(j["largest_batch"].size(), 2u);
  for (const auto& r : j["largest_batch"]) {
    EXPECT_EQ(r["budget_bytes"], budget);
    const int64_t b = r["batch"];
    ASSERT_GT(b, 32);
    const std::string precision = r["precision"];
    for (int64_t n : {b, b + 1}) {
      const std::string plan = (dir / (precision + std::to_string(n) + ".plan")).string();
      expect_success({"compile", source_path("models/mlp.onnx").string(), "--train", "--optimizer",
                      "adam", "--precision", precision, "--target", "cpu", "--input-shape",
                      "x=" + std::to_string(n) + "x64", "--input-shape", "y=" + std::to_string(n),
                      "-o", plan});
      if (n == b)
        EXPECT_LE(plan_total(plan), budget) << precision << " batch " << n;
      else
        EXPECT_GT(plan_total(plan), budget) << precision << " batch " << n;
    }
  }
  // fp16 fits more than fp32.
  EXPECT_GT(j["largest_batch"][1]["batch"].get<int64_t>(),
            j["largest_batch"][0]["batch"].get<int64_t>());
}

TEST(BatchPlanner, AnFp32PlanIsPlannedFromItsEmbeddedModelAndA16BitPlanIsRefused) {
  TempDir dir;
  const std::string model = source_path("models/mlp.onnx").string();
  const std::string p32 = (dir / "m32.plan").string(), p16 = (dir / "m16.plan").string();
  expect_success({"compile", model, "--train", "--optimizer", "adam", "-o", p32});
  expect_success({"compile", model, "--train", "--precision", "fp16", "-o", p16});
  const auto from_model = memory_json(model, "40MiB"), from_plan = memory_json(p32, "40MiB");
  EXPECT_EQ(from_plan["columns"], from_model["columns"]);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(from_plan["largest_batch"][i]["batch"], from_model["largest_batch"][i]["batch"]);
  EXPECT_THAT(expect_user_error({"inspect", p16, "--memory"}),
              ::testing::HasSubstr("give the ONNX model"));
}

// The training step's options given to `inspect --memory` shape the columns as they shape
// the compiled plan: SGD with momentum keeps a buffer per parameter, plain SGD none; a plan
// is planned with the optimizer it was compiled with, and says which.
TEST(BatchPlanner, TheStepsOptionsShapeTheColumnsAsTheyShapeThePlan) {
  TempDir dir;
  const std::string model = source_path("models/mlp.onnx").string();
  const std::vector<std::string> momentum = {"--optimizer", "sgd", "--momentum", "0.9"};
  const std::string plan = (dir / "sgd.plan").string();
  std::vector<std::string> compile = {"compile", model, "--train", "-o", plan};
  compile.insert(compile.end(), momentum.begin(), momentum.end());
  expect_success(compile);
  const auto planned = nlohmann::json::parse(expect_success({"inspect", plan, "--format", "json"}));
  std::vector<std::string> inspect = {"inspect", model, "--memory", "--format", "json"};
  inspect.insert(inspect.end(), momentum.begin(), momentum.end());
  const auto j = nlohmann::json::parse(expect_success(inspect));
  EXPECT_EQ(j["columns"][0]["state"], planned["state_bytes"]);
  EXPECT_EQ(j["columns"][0]["optimizer_state"], j["columns"][0]["parameters"]);
  const auto plain = nlohmann::json::parse(
      expect_success({"inspect", model, "--memory", "--format", "json", "--optimizer", "sgd"}));
  EXPECT_EQ(plain["columns"][0]["optimizer_state"], 0);
  EXPECT_THAT(expect_success({"inspect", plan, "--memory"}),
              ::testing::HasSubstr("training step (sgd, momentum 0.9)"));
}

TEST(BatchPlanner, GptWithItsBatchBakedInIsReplannedAndCheckedAgainstTorchExports) {
  TempDir dir;
  const int64_t budget = int64_t{48} << 20;
  const auto j = memory_json(source_path("models/gpt.onnx").string(), "48MiB");
  const auto& fp16 = j["largest_batch"][1];
  ASSERT_EQ(fp16["precision"], "fp16");
  const int64_t b = fp16["batch"];
  ASSERT_GT(b, 8);
  for (int64_t n : {b, b + 1}) {  // torch exports the gpt at that batch; ampc compiles it
    const std::string out = (dir / ("b" + std::to_string(n))).string();
    ASSERT_EQ(python("'" + source_path("models/export_models.py").string() + "' --batch " +
                     std::to_string(n) + " --out '" + out + "' > /dev/null"),
              0);
    const std::string plan = out + "/gpt.plan";
    expect_success({"compile", out + "/gpt.onnx", "--train", "--optimizer", "adam", "--precision",
                    "fp16", "--target", "cpu", "-o", plan});
    if (n == b)
      EXPECT_LE(plan_total(plan), budget);
    else
      EXPECT_GT(plan_total(plan), budget);
  }
}

TEST(HalfInputs, PlanInputIsFp16AndTrainingMatches) {
  TempDir dir;
  const std::string model = source_path("models/mlp.onnx").string();
  expect_success({"compile", model, "--train", "--precision", "fp16", "--half-inputs", "--target",
                  "cpu", "-o", (dir / "h.plan").string()});
  const plan::Plan p = plan::load_plan((dir / "h.plan").string());
  for (const auto& in : p.inputs()) {
    const auto dtype = p.buffers(in.buffer()).dtype();
    EXPECT_EQ(dtype, in.name() == "x" ? 10 /* FLOAT16 */ : 7 /* INT64 */) << in.name();
  }
  auto losses = [&](const std::string& tag, std::vector<std::string> extra) {
    std::vector<std::string> args = {
        "train",       model,  "--data",      source_path("models/data/digits.npz").string(),
        "--steps",     "30",   "--precision", "fp16",
        "--optimizer", "adam", "--log",       (dir / (tag + ".jsonl")).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    expect_success(args);
    std::vector<double> l;
    for (const auto& r : read_log(dir / (tag + ".jsonl"))) l.push_back(r["loss"]);
    return l;
  };
  const auto full = losses("full", {}), half = losses("half", {"--half-inputs"});
  ASSERT_EQ(full.size(), half.size());
  // x only feeds fc1's Gemm, which autocast casts to fp16 anyway: the same numbers.
  for (size_t i = 0; i < full.size(); ++i) EXPECT_NEAR(half[i], full[i], 1e-6 * full[i]) << i;
  EXPECT_THAT(expect_user_error(
                  {"compile", model, "--train", "--half-inputs", "-o", (dir / "x.plan").string()}),
              ::testing::HasSubstr("--half-inputs needs --precision fp16 or bf16"));
}

}  // namespace
}  // namespace ampc::testing
