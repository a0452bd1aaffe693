// `ampc inspect --precision-report` on what the compiler produced: a training plan of the mlp
// in fp16 (rules recorded at compile time, casts, the loss-scaling subgraph), the same step
// exported as ONNX, an fp32 plan, a source model without --precision, and the ops that compute
// a Pow by a constant.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "passes/weight_copies.h"
#include "tests/cli/cli_util.h"
#include "tests/support/mlp_variants.h"

namespace ampc::testing {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

const std::string kMlp = source_path("models/mlp.onnx").string();

json report(const std::string& path, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"inspect", path, "--precision-report", "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return json::parse(expect_success(args));
}

// The mlp compiled for training in fp16 (plan and exported ONNX), and in fp32.
class PlanReport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    expect_success({"compile", kMlp, "--train", "--precision", "fp16", "-o", path("mlp16.plan"),
                    "--emit-onnx", path("mlp16.onnx")});
    expect_success({"compile", kMlp, "--train", "-o", path("mlp32.plan")});
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string path(const std::string& name) { return (*dir_ / name).string(); }

  static TempDir* dir_;
};
TempDir* PlanReport::dir_ = nullptr;

// Plan steps by their (single) source node.
std::map<std::string, json> by_node(const json& r) {
  std::map<std::string, json> nodes;
  for (const auto& n : r["nodes"]) nodes[n["node"].get<std::string>()] = n;
  return nodes;
}

TEST_F(PlanReport, Fp16PlanHasAutocastsDecisions) {
  const json r = report(path("mlp16.plan"));
  EXPECT_EQ(r["precision"], "fp16");
  EXPECT_EQ(r["source"], "plan");
  std::set<std::string> seen;
  for (const auto& n : r["nodes"]) {
    EXPECT_TRUE(n.contains("step"));
    EXPECT_FALSE(n["rule"].get<std::string>().empty());
    const std::string node = n["node"];
    if (node.starts_with("grad/") || node.starts_with("optimizer/")) continue;
    seen.insert(n["op"].get<std::string>());
    if (n["op"] == "Gemm") {
      EXPECT_EQ(n["compute_dtype"], "f16");
      EXPECT_EQ(n["rule"], "ALLOW (table)");
    }
    if (n["op"] == "LayerNormalization") {
      EXPECT_EQ(n["compute_dtype"], "f32");
      EXPECT_EQ(n["rule"], "DENY (table)");
    }
    // The loss reads the head's fp16 scores widened (passes/widened_loss_scores.h).
    if (n["op"] == "ampc.SoftmaxCrossEntropyLoss") {
      EXPECT_EQ(n["compute_dtype"], "f32");
      EXPECT_EQ(n["rule"],
                "DENY (table); its f16 scores read widened, no float32 copy "
                "(widened_loss_scores.h)");
    }
  }
  EXPECT_TRUE(seen.count("Gemm") && seen.count("ampc.SoftmaxCrossEntropyLoss") &&
              seen.count("LayerNormalization"));
}

TEST_F(PlanReport, CastsMoveWhatTheSourceReportSays) {
  const json plan = report(path("mlp16.plan"));
  const json source = report(kMlp, {"--precision", "fp16"});
  std::map<std::string, json> plan_casts;
  int64_t total = 0;
  for (const auto& c : plan["casts"]) {
    plan_casts[c["node"].get<std::string>()] = c;
    total += c["bytes_per_step"].get<int64_t>();
  }
  EXPECT_EQ(plan["totals"]["cast_bytes_per_step"].get<int64_t>(), total);
  // Every Cast autocast inserted is in the plan, moving the same bytes; the plan has more
  // (the backward's Casts back, the scaler's inverse scale).
  ASSERT_FALSE(source["casts"].empty());
  for (const auto& c : source["casts"]) {
    const std::string node = c["node"];
    ASSERT_TRUE(plan_casts.count(node)) << node;
    const json& p = plan_casts[node];
    EXPECT_EQ(p["bytes_per_step"], c["bytes_per_step"]) << node;
    EXPECT_EQ(p["from"], c["from"]) << node;
    EXPECT_EQ(p["to"], c["to"]) << node;
    EXPECT_EQ(p["parameter"], c["parameter"]) << node;
  }
  EXPECT_GT(plan["casts"].size(), source["casts"].size());
  EXPECT_EQ(by_node(plan)[source["casts"][0]["node"]]["rule"], "cast inserted by autocast");
}

TEST_F(PlanReport, LossScalingSubgraph) {
  const json r = report(path("mlp16.plan"));
  ASSERT_TRUE(r["loss_scaling"].is_object());
  const json& s = r["loss_scaling"];
  EXPECT_EQ(s["mode"], "dynamic");
  EXPECT_EQ(s["init_scale"].get<double>(), 65536.0);
  EXPECT_EQ(s["init_growth_tracker"].get<int64_t>(), 0);
  EXPECT_EQ(s["growth_interval"].get<int64_t>(), 2000);
  EXPECT_EQ(s["growth_factor"].get<double>(), 2.0);
  EXPECT_EQ(s["backoff_factor"].get<double>(), 0.5);
  EXPECT_TRUE(s["clip_grad_norm"].is_null());
  std::set<std::string> ops;
  for (const auto& op : s["ops"]) ops.insert(op["op"].get<std::string>());
  EXPECT_EQ(ops, (std::set<std::string>{"ampc.UnscaleCheck", "ampc.UpdateScale"}));
  // The guarded updates are the optimizer's: every state of the exported step but the
  // scaler's own two.
  const auto proto = read_proto(path("mlp16.onnx"));
  std::set<std::string> optimizer_states;
  for (const auto& b : proto.training_info(0).update_binding()) {
    if (!b.key().starts_with("amp.")) optimizer_states.insert(b.key());
  }
  EXPECT_EQ(optimizer_states.size(), 6u);  // fc1, ln1, fc2: weight and bias (SGD)
  EXPECT_EQ(s["guarded_updates"].get<size_t>(), optimizer_states.size());
  EXPECT_EQ(s["guarded_states"].get<std::set<std::string>>(), optimizer_states);
  EXPECT_EQ(s["state_updates"].get<size_t>(), optimizer_states.size() + 2);

  const std::string text = expect_success({"inspect", path("mlp16.plan"), "--precision-report"});
  EXPECT_THAT(text, HasSubstr("loss scaling: dynamic"));
  EXPECT_THAT(text, HasSubstr("initial 65536"));
  EXPECT_THAT(text, HasSubstr("growth interval 2000"));
  EXPECT_THAT(text, HasSubstr("6 of 8 state updates guarded by amp.found_inf"));
  EXPECT_THAT(text, HasSubstr("ampc.UnscaleCheck"));
}

TEST_F(PlanReport, ScalerOptionsAndAdamState) {
  expect_success({"compile", kMlp, "--train", "--precision", "fp16", "--optimizer", "adam",
                  "--clip-grad-norm", "1.5", "--growth-interval", "10", "--min-scale", "1",
                  "--max-scale", "1e6", "-o", path("adam.plan")});
  const json s = report(path("adam.plan"))["loss_scaling"];
  EXPECT_EQ(s["growth_interval"].get<int64_t>(), 10);
  EXPECT_EQ(s["min_scale"].get<double>(), 1.0);
  EXPECT_EQ(s["max_scale"].get<double>(), 1e6);
  EXPECT_EQ(s["clip_grad_norm"].get<double>(), 1.5);
  // Parameters, both moments each, and the step counter: 6 x 3 + 1.
  EXPECT_EQ(s["guarded_updates"].get<int>(), 19);
}

// The exported step is the one before the optimizer took over the parameters' Casts
// (passes/weight_copies.h): the plan has, besides, the skip-step's Where per weight copy.
TEST_F(PlanReport, ExportedOnnxAgreesWithThePlan) {
  json plan = report(path("mlp16.plan"));
  const json onnx = report(path("mlp16.onnx"));
  EXPECT_EQ(onnx["source"], "model");
  EXPECT_EQ(onnx["precision"], "fp16");
  json kept_nodes = json::array();
  for (const auto& n : plan["nodes"]) {
    if (!n["node"].get<std::string>().ends_with(passes::kCopyGuardSuffix)) kept_nodes.push_back(n);
  }
  EXPECT_EQ(plan["nodes"].size(), kept_nodes.size() + 4);  // fc1, fc2: weight and bias
  plan["nodes"] = kept_nodes;
  EXPECT_EQ(plan["loss_scaling"]["guarded_copies"], 4);
  plan["loss_scaling"]["guarded_copies"] = 0;
  ASSERT_EQ(onnx["nodes"].size(), plan["nodes"].size());
  auto plan_nodes = by_node(plan);
  for (const auto& n : onnx["nodes"]) {
    const std::string node = n["node"];
    ASSERT_TRUE(plan_nodes.count(node)) << node;
    EXPECT_EQ(n["compute_dtype"], plan_nodes[node]["compute_dtype"]) << node;
    EXPECT_EQ(n["op"], plan_nodes[node]["op"]) << node;
    EXPECT_FALSE(n.contains("step"));
    if (!n["op"].get<std::string>().starts_with("ampc.") && n["op"] != "Where") {
      EXPECT_EQ(n["rule"], "as exported") << node;
    }
  }
  // The same Casts; the parameters' run in the optimizer, after the other Casts.
  auto casts_by_node = [](const json& casts) {
    std::map<std::string, json> out;
    for (const auto& c : casts) out[c["node"].get<std::string>()] = c;
    return out;
  };
  EXPECT_EQ(casts_by_node(onnx["casts"]), casts_by_node(plan["casts"]));
  for (const char* key : {"nodes", "nodes_low"})  // the four Wheres are fp16
    plan["totals"][key] = plan["totals"][key].get<int>() - 4;
  EXPECT_EQ(onnx["totals"], plan["totals"]);
  EXPECT_EQ(onnx["loss_scaling"], plan["loss_scaling"]);
}

TEST_F(PlanReport, Fp32PlanHasNoLossScaling) {
  const json r = report(path("mlp32.plan"));
  EXPECT_EQ(r["precision"], "fp32");
  EXPECT_TRUE(r["loss_scaling"].is_null());
  EXPECT_EQ(r["totals"]["nodes_low"].get<int>(), 0);
  for (const auto& n : r["nodes"]) EXPECT_EQ(n["rule"], "no autocast");
  EXPECT_THAT(expect_success({"inspect", path("mlp32.plan"), "--precision-report"}),
              HasSubstr("loss scaling: not in this step"));
}

// A Pow by 2 (DENY: fp32) becomes x * x after autocast (passes/scalar_powers.h): its Mul keeps
// the Pow's decision, naming it.
TEST(PowReport, ThePowersOpsCarryThePowsDecision) {
  TempDir dir;
  const std::string model = (dir / "square.onnx").string(), plan = (dir / "square.plan").string();
  test::write_mlp_with_square(kMlp, model);
  expect_success({"compile", model, "--train", "--precision", "bf16", "-o", plan});
  const json r = report(plan);
  int powers = 0;
  for (const auto& n : r["nodes"]) {
    const std::string node = n["node"];
    if (!node.starts_with("/square/Pow/")) continue;
    ++powers;
    EXPECT_EQ(n["op"], "Mul");
    EXPECT_EQ(n["compute_dtype"], "f32");
    EXPECT_EQ(n["rule"],
              "DENY (table), computing Pow '/square/Pow' as PyTorch does (passes/scalar_powers.h)");
  }
  EXPECT_EQ(powers, 1);
}

TEST(SourceReport, WithoutPrecisionEverythingIsFp32) {
  const json r = report(kMlp);
  EXPECT_EQ(r["precision"], "fp32");
  EXPECT_TRUE(r["casts"].empty());
  EXPECT_TRUE(r["loss_scaling"].is_null());
  ASSERT_FALSE(r["nodes"].empty());
  for (const auto& n : r["nodes"]) {
    EXPECT_EQ(n["rule"], "no autocast");
    EXPECT_NE(n["compute_dtype"], "f16");
  }
}

TEST_F(PlanReport, Refusals) {
  // Without --precision-report a plan shows its kernels and memory plan (plan_summary_test).
  EXPECT_THAT(
      expect_user_error({"inspect", path("mlp16.plan"), "--precision-report", "--kernel", "k"}),
      HasSubstr("--kernel"));
  EXPECT_THAT(expect_user_error(
                  {"inspect", path("mlp16.plan"), "--precision-report", "--precision", "bf16"}),
              HasSubstr("--precision"));
}

}  // namespace
}  // namespace ampc::testing
