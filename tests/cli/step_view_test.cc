// `ampc inspect ... --dot/--html` of the whole training step (report/step_view.h).
// The oracle for what must be drawn is the training step ampc exports in ONNX's training
// format, read here with ONNX's protobuf classes: every node of its graph and algorithm, the
// Where nodes that read amp.found_inf (the skip-step), the Casts autocast inserted. The
// dtype expectations are PyTorch autocast's table (MatMul in fp16, Softmax in fp32).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kMlp = source_path("models/mlp.onnx").string();

// Every node of an exported training step: main graph, then the training algorithm.
std::vector<onnx::NodeProto> step_nodes(const onnx::ModelProto& m) {
  std::vector<onnx::NodeProto> nodes(m.graph().node().begin(), m.graph().node().end());
  for (const auto& t : m.training_info())
    nodes.insert(nodes.end(), t.algorithm().node().begin(), t.algorithm().node().end());
  return nodes;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Every fused kernel of `plan` (as `ampc inspect PLAN --format json` lists them) is a cluster
// of `dot` holding the ONNX nodes it fused; returns how many were checked.
int kernel_clusters_hold_their_nodes(const std::string& plan, const std::string& dot) {
  const auto summary = nlohmann::json::parse(expect_success({"inspect", plan, "--format", "json"}));
  int fused = 0;
  for (const auto& k : summary["kernel_list"]) {
    if (!k["kernel"].is_string() || k["kernel"].get<std::string>().empty() || k["nodes"].size() < 2)
      continue;
    const std::string label = "label=\"" + k["kernel"].get<std::string>() + " (step " +
                              std::to_string(k["step"].get<int>()) + ")\"";
    const size_t at = dot.find(label);
    EXPECT_NE(at, std::string::npos) << label;
    if (at == std::string::npos) continue;
    const size_t end = dot.find("\n    }\n", at);  // the kernel cluster's end
    for (const auto& n : k["nodes"])
      EXPECT_NE(dot.substr(at, end - at).find("tooltip=\"" + n.get<std::string>() + "\""),
                std::string::npos)
          << n << " in " << label;
    ++fused;
  }
  return fused;
}

class StepView : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    expect_success({"compile", kMlp, "--train", "--precision", "fp16", "--optimizer", "adam", "-o",
                    path("mlp.plan"), "--emit-onnx", path("mlp.train.onnx")});
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string path(const std::string& name) { return (*dir_ / name).string(); }
  static std::string dot_of(std::vector<std::string> args) {
    args.insert(args.begin(), "inspect");
    args.push_back("--dot");
    args.push_back(path("view.dot"));
    expect_success(args);
    return read_bytes(path("view.dot"));
  }
  static TempDir* dir_;
};
TempDir* StepView::dir_ = nullptr;

// The exported training model drawn: every node of its step, each phase a cluster, one red
// found_inf edge per skip-step Where, every inserted cast bold red.
TEST_F(StepView, ExportedTrainingModelDrawsTheWholeStep) {
  const std::string dot = dot_of({path("mlp.train.onnx")});
  const auto nodes = step_nodes(read_proto(path("mlp.train.onnx")));
  int wheres = 0, casts = 0, found_inf_readers = 0;
  for (const auto& n : nodes) {
    EXPECT_THAT(dot, HasSubstr("tooltip=\"" + n.name() + "\"")) << n.name();
    if (n.op_type() == "Where" && n.input(0) == "amp.found_inf") ++wheres;
    for (const auto& i : n.input()) found_inf_readers += i == "amp.found_inf";
    if (n.op_type() == "Cast" && n.name().find("autocast/") != std::string::npos) ++casts;
  }
  EXPECT_GT(wheres, 0);
  EXPECT_GT(casts, 0);
  for (const char* phase : {"forward", "backward", "loss scaling", "optimizer", "skip-step"})
    EXPECT_THAT(dot, HasSubstr("label=\"" + std::string(phase) + "\"")) << phase;
  EXPECT_EQ(count(dot, "label=\"found_inf\""), found_inf_readers);  // the Wheres, UpdateScale
  // The legend's swatch is one more.
  EXPECT_EQ(count(dot, "color=\"#d62728\", penwidth=3"), casts + 1);
}

// The same step from the source model with the compile options, and from the plan: the plan's
// fused kernels are clusters of the ONNX nodes they fused (`ampc inspect PLAN --format json`
// lists them), the MatMul-like Gemms fp16, LayerNormalization fp32.
TEST_F(StepView, SourceModelAndPlanDrawKernelsAndPrecision) {
  const std::string from_source =
      dot_of({kMlp, "--train", "--precision", "fp16", "--optimizer", "adam"});
  const std::string from_plan = dot_of({path("mlp.plan")});
  for (const std::string* dot : {&from_source, &from_plan}) {
    EXPECT_THAT(*dot, HasSubstr("Gemm\\nGemm\\nfp16: ALLOW (table)"));
    EXPECT_THAT(*dot, HasSubstr("LayerNormalization\\nLayerNormalization\\nfp32"));
    EXPECT_THAT(*dot, HasSubstr("label=\"skip-step\""));
  }
  EXPECT_GT(kernel_clusters_hold_their_nodes(path("mlp.plan"), from_plan), 3);
}

// --focus, --around, --collapse, --diff-autocast.
TEST_F(StepView, NarrowerViews) {
  const std::string amp = dot_of({path("mlp.plan"), "--focus", "amp"});
  EXPECT_THAT(amp, HasSubstr("UnscaleCheck"));
  EXPECT_THAT(amp, HasSubstr("autocast/fc1.weight_f16"));
  EXPECT_THAT(amp, Not(HasSubstr("tooltip=\"/ln1/LayerNormalization\"")));
  EXPECT_THAT(amp, Not(HasSubstr("tooltip=\"grad//fc2/Gemm/Gemm_node_1\"")));
  // The weights' fp16 gradients are checked as they are and unscaled where the optimizer
  // reads them (fp32(g16) * inv_scale, amp's Cast and Mul): no fp32 copy is stored in between.
  EXPECT_THAT(amp, HasSubstr("tooltip=\"amp/Mul_node_"));
  EXPECT_THAT(amp, Not(HasSubstr("tooltip=\"grad/autocast/fc1.weight_f16/Cast_node_1\"")));

  // The Gemm's neighbours one edge away, from the exported graph: its producers and readers.
  const std::string around =
      dot_of({path("mlp.train.onnx"), "--around", "/fc2/Gemm", "--depth", "1"});
  const auto nodes = step_nodes(read_proto(path("mlp.train.onnx")));
  std::set<std::string> gemm_in, gemm_out, near;
  for (const auto& n : nodes)
    if (n.name() == "/fc2/Gemm") {
      gemm_in.insert(n.input().begin(), n.input().end());
      gemm_out.insert(n.output().begin(), n.output().end());
    }
  for (const auto& n : nodes) {
    bool linked = n.name() == "/fc2/Gemm";
    for (const auto& o : n.output()) linked |= gemm_in.count(o) > 0;
    for (const auto& i : n.input()) linked |= gemm_out.count(i) > 0;
    if (linked) near.insert(n.name());
    EXPECT_EQ(around.find("tooltip=\"" + n.name() + "\"") != std::string::npos, linked) << n.name();
  }
  EXPECT_GE(near.size(), 4u);

  const std::string collapsed = dot_of({path("mlp.plan"), "--collapse", "1"});
  EXPECT_THAT(collapsed, HasSubstr("/ln1\\n"));
  EXPECT_THAT(collapsed, Not(HasSubstr("tooltip=\"/ln1/LayerNormalization\"")));

  // What autocast changed in the step: the Gemms (and their backward) to fp16, the casts
  // inserted; LayerNormalization and the optimizer's fp32 math are not drawn, the fp16 weight
  // copies the optimizer writes are.
  const std::string diff = dot_of({kMlp, "--train", "--precision", "fp16", "--diff-autocast"});
  EXPECT_THAT(diff, HasSubstr("tooltip=\"/fc1/Gemm\""));
  EXPECT_THAT(diff, HasSubstr("fp32 -> fp16"));
  EXPECT_THAT(diff, HasSubstr("inserted cast fp32 -> fp16"));
  EXPECT_THAT(diff, Not(HasSubstr("tooltip=\"/ln1/LayerNormalization\"")));
  const size_t optimizer = diff.find("label=\"optimizer\"");
  ASSERT_NE(optimizer, std::string::npos);
  EXPECT_GT(diff.find("tooltip=\"autocast/fc1.weight_f16\""), optimizer);
  EXPECT_THAT(diff, Not(HasSubstr("tooltip=\"optimizer/")));  // its fp32 math is not drawn
}

// The page's data carries a --grad-stats log: every recorded gradient on its tensor and on
// the node the log names, as `ampc train --grad-stats` wrote them.
TEST_F(StepView, PageCarriesGradientStatistics) {
  const std::string log = path("stats.jsonl");
  expect_success({"train", kMlp, "--precision", "fp16", "--data",
                  source_path("models/data/digits.npz").string(), "--steps", "2", "--grad-stats",
                  log, "--grad-stats-every", "1"});
  const std::string page = path("mlp.html");
  expect_success(
      {"inspect", kMlp, "--train", "--precision", "fp16", "--html", page, "--grad-stats", log});
  const std::string html = read_bytes(page);
  const std::string open = "<script type=\"application/json\" id=\"step-data\">";
  const size_t begin = html.find(open) + open.size();
  const nlohmann::json data =
      nlohmann::json::parse(html.substr(begin, html.find("</script>", begin) - begin));
  std::map<std::string, double> max_abs;  // tensor -> the last recorded step's max |x|
  std::set<std::string> layers;
  for (const auto& r : read_log(log)) {
    max_abs[r["tensor"]] = r["max_abs"];
    layers.insert(r["node"]);
  }
  ASSERT_FALSE(max_abs.empty());
  std::set<std::string> tensors_with_stats, nodes_with_stats;
  for (const auto& t : data["tensors"]) {
    if (t["grad"].is_null()) continue;
    tensors_with_stats.insert(t["name"]);
    EXPECT_EQ(t["grad"]["max_abs"].get<double>(), max_abs.at(t["name"]));
  }
  for (const auto& n : data["nodes"])
    if (!n["grad"].is_null()) nodes_with_stats.insert(n["name"]);
  std::set<std::string> logged;
  for (const auto& [t, _] : max_abs) logged.insert(t);
  EXPECT_EQ(tensors_with_stats, logged);
  EXPECT_EQ(nodes_with_stats, layers);
}

// A forward plan has no graph of its own: its kernels still hold their nodes, ops named.
TEST_F(StepView, ForwardPlanDrawsItsKernels) {
  expect_success({"compile", kMlp, "--precision", "fp16", "-o", path("fwd.plan")});
  const std::string dot = dot_of({path("fwd.plan")});
  EXPECT_GT(kernel_clusters_hold_their_nodes(path("fwd.plan"), dot), 0);
  EXPECT_THAT(dot, HasSubstr("label=\"Cast\\nx_f16\\nfp16: cast inserted by autocast\""));
  EXPECT_THAT(dot, Not(HasSubstr("label=\"backward\"")));
}

TEST_F(StepView, RefusalsNameWhatIsWrong) {
  EXPECT_THAT(expect_user_error({"inspect", kMlp, "--lr", "0.1", "--dot", path("x.dot")}),
              HasSubstr("--lr: training options, but no --train"));
  EXPECT_THAT(expect_user_error({"inspect", path("mlp.plan"), "--dot", path("x.dot"), "--around",
                                 "no-such-node"}),
              HasSubstr("no-such-node"));
  EXPECT_THAT(expect_user_error(
                  {"inspect", path("mlp.plan"), "--html", path("x.html"), "--precision", "bf16"}),
              HasSubstr("a plan's were fixed when it was compiled"));
  EXPECT_THAT(
      expect_user_error({"inspect", kMlp, "--train", "--diff-autocast", "--dot", path("x.dot")}),
      HasSubstr("--diff-autocast needs --precision"));
  EXPECT_THAT(expect_user_error({"inspect", kMlp, "--train"}), HasSubstr("--html"));
  EXPECT_FALSE(std::filesystem::exists(path("x.dot")));
}

}  // namespace
}  // namespace ampc::testing
