// `ampc inspect --precision ... --precision-report` (text and JSON) and `--precision` on
// `ampc compile`, run as a separate process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

const std::string kMlp = source_path("models/mlp.onnx").string();

json report(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"inspect", kMlp, "--precision-report", "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return json::parse(expect_success(args));
}

TEST(PrecisionReport, JsonListsEveryNodeAndCast) {
  const json r = report({"--precision", "fp16"});
  EXPECT_EQ(r["precision"], "fp16");
  // The ops of mlp.onnx (models/README.md), Constants folded away.
  std::set<std::string> ops;
  for (const auto& n : r["nodes"]) {
    ops.insert(n["op"].get<std::string>());
    EXPECT_FALSE(n["rule"].get<std::string>().empty());
    if (n["op"] == "Gemm") {
      EXPECT_EQ(n["compute_dtype"], "f16");
      EXPECT_EQ(n["rule"], "ALLOW (table)");
    }
    if (n["op"] == "LayerNormalization") {
      EXPECT_EQ(n["compute_dtype"], "f32");
      EXPECT_EQ(n["rule"], "DENY (table)");
    }
    // The loss reads the head's fp16 scores widened (passes/widened_loss_scores.h).
    if (n["op"] == "SoftmaxCrossEntropyLoss") {
      EXPECT_EQ(n["compute_dtype"], "f32");
      EXPECT_EQ(n["rule"],
                "DENY (table); its f16 scores read widened, no float32 copy "
                "(widened_loss_scores.h)");
    }
  }
  EXPECT_TRUE(ops.count("Gemm") && ops.count("LayerNormalization") && ops.count("Erf"));
  int64_t total = 0;
  int parameters = 0;
  ASSERT_FALSE(r["casts"].empty());
  for (const auto& c : r["casts"]) {
    const int64_t numel = c["numel"];
    const int in = c["from"] == "f32" ? 4 : 2, out = c["to"] == "f32" ? 4 : 2;
    EXPECT_EQ(c["bytes_per_step"].get<int64_t>(), numel * (in + out));
    total += numel * (in + out);
    parameters += c["parameter"].get<bool>();
  }
  EXPECT_EQ(r["totals"]["cast_bytes_per_step"].get<int64_t>(), total);
  EXPECT_EQ(r["totals"]["casts"].get<size_t>(), r["casts"].size());
  EXPECT_EQ(r["totals"]["parameter_casts"].get<int>(), parameters);
  EXPECT_EQ(parameters, 4);  // fc1 and fc2: weight and bias, one Cast each
  EXPECT_EQ(r["source"], "autocast");
  EXPECT_TRUE(r["loss_scaling"].is_null());  // a forward graph: no training step
}

TEST(PrecisionReport, TextHasTheSameContent) {
  const std::string text =
      expect_success({"inspect", kMlp, "--precision", "bf16", "--precision-report"});
  const json r = report({"--precision", "bf16"});
  for (const auto& n : r["nodes"]) EXPECT_THAT(text, HasSubstr(n["node"].get<std::string>()));
  for (const auto& c : r["casts"]) {
    EXPECT_THAT(text,
                HasSubstr(std::to_string(c["bytes_per_step"].get<int64_t>()) + " bytes/step"));
  }
  EXPECT_THAT(text, HasSubstr(std::to_string(r["totals"]["cast_bytes_per_step"].get<int64_t>()) +
                              " bytes moved by casts per step"));
}

TEST(PrecisionReport, OverridesShowAsTheDecidingRule) {
  const json r = report({"--precision", "fp16", "--deny", "Gemm", "--keep-fp32", "/act/*"});
  for (const auto& n : r["nodes"]) {
    if (n["op"] == "Gemm") {
      EXPECT_EQ(n["rule"], "DENY (--deny Gemm)");
    }
    if (n["node"].get<std::string>().rfind("/act/", 0) == 0) {
      EXPECT_EQ(n["compute_dtype"], "f32");
      EXPECT_THAT(n["rule"].get<std::string>(), HasSubstr("--keep-fp32"));
    }
  }
}

TEST(PrecisionReport, Refusals) {
  EXPECT_THAT(expect_user_error({"inspect", kMlp, "--precision", "fp16", "--precision-report",
                                 "--deny", "Gemmm"}),
              HasSubstr("Gemmm"));
  // Overrides need a precision to apply to (without one the report is of the model as it is).
  EXPECT_THAT(expect_user_error({"inspect", kMlp, "--precision-report", "--deny", "Gemm"}),
              HasSubstr("--precision"));
  TempDir dir;
  write_bytes(dir / "p.json", R"({"allow": ["NotAnOp"]})");
  EXPECT_THAT(expect_user_error({"inspect", kMlp, "--precision", "fp16", "--precision-report",
                                 "--policy", (dir / "p.json").string()}),
              HasSubstr("NotAnOp"));
}

TEST(PrecisionCompile, ForwardPlanWithoutTrain) {
  TempDir dir;
  expect_success({"compile", kMlp, "--precision", "fp16", "-o", (dir / "mlp.plan").string()});
  EXPECT_FALSE(read_bytes(dir / "mlp.plan").empty());
  EXPECT_THAT(
      expect_user_error({"compile", kMlp, "--precision", "fp8", "-o", (dir / "x.plan").string()}),
      HasSubstr("fp8"));
}

}  // namespace
}  // namespace ampc::testing
