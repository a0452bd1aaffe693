// `ampc inspect PLAN`: the text and JSON summary (header, kernels in execution order, memory
// plan) checked against the plan file read here, and `--kernel NAME [--show ptx|llvm]`
// with its refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/plan/plan_file.h"
#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kGpt = source_path("models/gpt.onnx").string();
const std::string kMlp = source_path("models/mlp.onnx").string();

class PlanSummary : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    expect_success({"compile", kGpt, "--train", "--optimizer", "adam", "--precision", "fp16", "-o",
                    path("gpt16.plan")});
    expect_success({"compile", kMlp, "--train", "--target", "cpu", "-o", path("mlp_cpu.plan")});
    expect_success({"compile", kMlp, "--train", "--no-fusion", "-o", path("mlp_unfused.plan")});
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string path(const std::string& name) { return (*dir_ / name).string(); }

  static TempDir* dir_;
};
TempDir* PlanSummary::dir_ = nullptr;

// Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity of the ONNX domain) launch nothing.
bool is_view(const plan::Step& s) {
  static const std::vector<std::string> views = {"Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                                 "Identity"};
  return s.domain().empty() && std::find(views.begin(), views.end(), s.op()) != views.end();
}

TEST_F(PlanSummary, JsonMatchesThePlan) {
  const plan::Plan p = plan::load_plan(path("gpt16.plan"));
  const json j = json::parse(expect_success({"inspect", path("gpt16.plan"), "--format", "json"}));
  for (const char* key :
       {"model", "target", "precision", "steps", "kernels", "kernel_list", "arena_bytes",
        "arena_lower_bound_bytes", "state_bytes", "activation_bytes", "workspace_bytes",
        "constant_bytes", "input_bytes", "arena_peak"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["model"], "gpt");
  EXPECT_EQ(j["target"], "cuda:sm_90");
  EXPECT_EQ(j["precision"], "fp16");
  EXPECT_EQ(j["steps"], p.steps_size());

  // Kernels: every step but the views, in order, with all its nodes.
  std::vector<int> launched;
  for (int s = 0; s < p.steps_size(); ++s) {
    if (!is_view(p.steps(s))) launched.push_back(s);
  }
  EXPECT_EQ(j["kernels"], launched.size());
  ASSERT_EQ(j["kernel_list"].size(), launched.size());
  int fused = 0;
  for (size_t k = 0; k < launched.size(); ++k) {
    const json& e = j["kernel_list"][k];
    const plan::Step& step = p.steps(launched[k]);
    EXPECT_EQ(e["index"], k);
    EXPECT_EQ(e["step"], launched[k]);
    EXPECT_EQ(e["nodes"].get<std::vector<std::string>>(),
              std::vector<std::string>(step.source_nodes().begin(), step.source_nodes().end()));
    if (step.kernel().empty()) {
      EXPECT_EQ(e["name"], step.domain().empty() ? step.op() : step.domain() + "." + step.op());
    } else {
      ++fused;
      EXPECT_EQ(e["name"], step.segments() > 1
                               ? step.kernel() + " x " + std::to_string(step.segments())
                               : step.kernel());
    }
    int outputs = 0;
    for (int32_t o : step.outputs()) outputs += o >= 0;
    EXPECT_EQ(e["outputs"].size(), outputs);
  }
  EXPECT_GT(fused, 0);

  // Memory: the plan's numbers; the arena within 10% of its bound, below the activations'
  // storage without reuse.
  const plan::MemoryPlan& m = p.memory();
  EXPECT_EQ(j["arena_bytes"], m.arena_bytes());
  EXPECT_EQ(j["arena_lower_bound_bytes"], m.arena_lower_bound_bytes());
  EXPECT_EQ(j["state_bytes"], m.state_bytes());
  EXPECT_EQ(j["constant_bytes"], m.constant_bytes());
  EXPECT_EQ(j["input_bytes"], m.input_bytes());
  EXPECT_EQ(j["workspace_bytes"], 32 << 20);
  EXPECT_GT(m.arena_bytes(), 0);
  EXPECT_LE(m.arena_bytes(), 1.10 * m.arena_lower_bound_bytes());
  EXPECT_GT(j["activation_bytes"].get<int64_t>(), m.arena_bytes());
  EXPECT_EQ(j["arena_peak"]["bytes"], m.arena_lower_bound_bytes());
  int64_t state = 0;
  for (const auto& b : p.buffers()) {
    if (b.role() == plan::STATE) {
      static const std::map<int, int64_t> sizes = {{1, 4},  {6, 4},  {7, 8}, {9, 1},
                                                   {10, 2}, {11, 8}, {16, 2}};
      int64_t n = sizes.at(b.dtype());
      for (int64_t d : b.shape()) n *= d;
      state += (n + 255) / 256 * 256;
    }
  }
  EXPECT_EQ(j["state_bytes"], state);
}

TEST_F(PlanSummary, Text) {
  const plan::Plan p = plan::load_plan(path("gpt16.plan"));
  const std::string out = expect_success({"inspect", path("gpt16.plan")});
  int64_t kernels = 0;
  for (const auto& s : p.steps()) kernels += is_view(s) ? 0 : 1;
  EXPECT_THAT(out, HasSubstr("model      gpt\n"));
  EXPECT_THAT(out, HasSubstr("target     cuda:sm_90\n"));
  EXPECT_THAT(out, HasSubstr("precision  fp16\n"));
  EXPECT_THAT(out, HasSubstr("kernels    " + std::to_string(kernels) + "\n"));
  EXPECT_THAT(out, HasSubstr("kernels, in execution order"));
  EXPECT_THAT(out, HasSubstr("more), "));  // long node lists are abbreviated
  EXPECT_THAT(out, HasSubstr("/blocks.0/attn/MatMul"));
  EXPECT_THAT(out, HasSubstr("  arena        "));
  EXPECT_THAT(out, HasSubstr("  lower bound  "));
  EXPECT_THAT(out, HasSubstr("workspace    33,554,432 B (32.0 MiB)"));
  EXPECT_THAT(out, HasSubstr("arena peak: "));
  // Multi-tensor kernels show their segments.
  bool multi = false;
  for (const auto& s : p.steps()) {
    if (s.segments() > 1) {
      EXPECT_THAT(out, HasSubstr(s.kernel() + " x " + std::to_string(s.segments())));
      multi = true;
    }
  }
  EXPECT_TRUE(multi);
}

// The BatchNorm running-variance update a training plan makes: PyTorch's for the cnn, which
// PyTorch exported, ONNX's when asked for; nothing for the mlp, which has no BatchNorm.
TEST_F(PlanSummary, RunningVarianceChoice) {
  const std::string cnn = source_path("models/cnn.onnx").string();
  expect_success({"compile", cnn, "--train", "--target", "cpu", "-o", path("cnn.plan")});
  expect_success({"compile", cnn, "--train", "--target", "cpu", "--batchnorm-running-var", "biased",
                  "-o", path("cnn_biased.plan")});
  const json unbiased =
      json::parse(expect_success({"inspect", path("cnn.plan"), "--format", "json"}));
  const json biased =
      json::parse(expect_success({"inspect", path("cnn_biased.plan"), "--format", "json"}));
  const json none =
      json::parse(expect_success({"inspect", path("mlp_cpu.plan"), "--format", "json"}));
  EXPECT_EQ(unbiased["batchnorm_running_var"], "unbiased");
  EXPECT_EQ(biased["batchnorm_running_var"], "biased");
  EXPECT_TRUE(none["batchnorm_running_var"].is_null());
  EXPECT_THAT(expect_success({"inspect", path("cnn.plan")}),
              HasSubstr("batchnorm  running variance from the batch's unbiased variance"));
  EXPECT_THAT(expect_success({"inspect", path("mlp_cpu.plan")}), Not(HasSubstr("batchnorm  ")));
}

TEST_F(PlanSummary, OneKernel) {
  const plan::Plan p = plan::load_plan(path("gpt16.plan"));
  // The first kernel that reads an input (some only turn a constant into fp16).
  std::string name;
  for (const auto& k : p.kernels()) {
    if (k.inputs_size() > 0 && name.empty()) name = k.name();
  }
  ASSERT_FALSE(name.empty());
  const std::string def = expect_success({"inspect", path("gpt16.plan"), "--kernel", name});
  EXPECT_THAT(def, HasSubstr("kernel " + name + "\n"));
  EXPECT_THAT(def, HasSubstr("= load "));
  const std::string ptx =
      expect_success({"inspect", path("gpt16.plan"), "--kernel", name, "--show", "ptx"});
  EXPECT_THAT(ptx, HasSubstr(".target sm_90"));
  const std::string llvm =
      expect_success({"inspect", path("mlp_cpu.plan"), "--kernel", "fused_0", "--show", "llvm"});
  EXPECT_THAT(llvm, HasSubstr("define "));
  EXPECT_THAT(llvm, Not(HasSubstr("nvptx")));
}

TEST_F(PlanSummary, Refusals) {
  EXPECT_THAT(expect_user_error({"inspect", path("gpt16.plan"), "--kernel", "no_such_kernel"}),
              HasSubstr("no kernel 'no_such_kernel' in the plan"));
  EXPECT_THAT(expect_user_error({"inspect", path("mlp_unfused.plan"), "--kernel", "fused_0"}),
              HasSubstr("no fused kernels"));
  EXPECT_THAT(
      expect_user_error({"inspect", path("mlp_cpu.plan"), "--kernel", "fused_0", "--show", "ptx"}),
      HasSubstr("no PTX: compiled with --target cpu"));
  EXPECT_THAT(expect_user_error({"inspect", path("gpt16.plan"), "--show", "ptx"}),
              HasSubstr("--show needs --kernel"));
  EXPECT_THAT(expect_user_error({"inspect", kMlp, "--kernel", "fused_0"}),
              HasSubstr("apply to plans"));
}

TEST_F(PlanSummary, UnfusedPlanListsOneKernelPerStep) {
  const plan::Plan p = plan::load_plan(path("mlp_unfused.plan"));
  const json j =
      json::parse(expect_success({"inspect", path("mlp_unfused.plan"), "--format", "json"}));
  EXPECT_EQ(p.kernels_size(), 0);
  for (const json& k : j["kernel_list"]) {
    EXPECT_TRUE(k["kernel"].is_null());
    EXPECT_EQ(k["nodes"].size(), 1);
  }
  EXPECT_LE(j["arena_ratio"].get<double>(), 1.10);
}

}  // namespace
}  // namespace ampc::testing
