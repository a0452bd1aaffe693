// `ampc inspect` output checked field by field. Expected values come from two independent
// sources: the ONNX file read here with ONNX's own protobuf classes (not ampc's importer),
// and the numbers models/README.md documents for the example models.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;

// ONNX TensorProto.DataType codes -> the names ampc prints (independent of base/dtype.cc).
std::string dtype_name(int code) {
  static const std::map<int, std::string> kNames = {{1, "f32"},  {7, "i64"},   {9, "bool"},
                                                    {10, "f16"}, {16, "bf16"}, {6, "i32"}};
  auto it = kNames.find(code);
  return it == kNames.end() ? "code " + std::to_string(code) : it->second;
}

int dtype_size(int code) {
  static const std::map<int, int> kSizes = {{1, 4}, {7, 8}, {9, 1}, {10, 2}, {16, 2}, {6, 4}};
  return kSizes.at(code);
}

// What inspect should report, computed from the protobuf.
struct Expected {
  json inputs = json::array();
  json outputs = json::array();
  int64_t init_count = 0;
  int64_t init_bytes = 0;
  json ops = json::object();
  json opsets = json::object();
  int64_t nodes = 0;
};

json value_json(const onnx::ValueInfoProto& v) {
  json shape = json::array();
  for (const auto& d : v.type().tensor_type().shape().dim()) shape.push_back(d.dim_value());
  return {{"name", v.name()},
          {"dtype", dtype_name(v.type().tensor_type().elem_type())},
          {"shape", shape}};
}

Expected expected_from_proto(const fs::path& path) {
  const onnx::ModelProto m = read_proto(path);
  Expected e;
  std::map<std::string, bool> is_init;
  for (const auto& t : m.graph().initializer()) {
    is_init[t.name()] = true;
    ++e.init_count;
    int64_t numel = 1;
    for (int64_t d : t.dims()) numel *= d;
    e.init_bytes += numel * dtype_size(t.data_type());
  }
  for (const auto& in : m.graph().input()) {
    if (!is_init.count(in.name())) e.inputs.push_back(value_json(in));
  }
  for (const auto& out : m.graph().output()) e.outputs.push_back(value_json(out));
  std::map<std::string, int64_t> ops;
  for (const auto& n : m.graph().node()) ++ops[n.op_type()];
  for (const auto& [op, count] : ops) e.ops[op] = count;
  for (const auto& o : m.opset_import())
    e.opsets[o.domain().empty() ? "ai.onnx" : o.domain()] = o.version();
  e.nodes = m.graph().node_size();
  return e;
}

json inspect_json(const std::vector<std::string>& args) {
  const RunResult r = run_ampc(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  json j;
  EXPECT_NO_THROW(j = json::parse(r.out)) << "stdout is not one JSON value:\n" << r.out;
  EXPECT_TRUE(j.is_object());
  return j;
}

const std::string kMlp = source_path("models/mlp.onnx").string();

TEST(InspectJson, MlpMatchesTheFileFieldByField) {
  const json j = inspect_json({"inspect", kMlp, "--format", "json"});
  const Expected e = expected_from_proto(kMlp);
  for (const char* key : {"inputs", "outputs", "initializers", "ops", "opsets"}) {
    EXPECT_TRUE(j.contains(key)) << "missing key " << key;
  }
  EXPECT_EQ(j["inputs"], e.inputs);
  EXPECT_EQ(j["outputs"], e.outputs);
  EXPECT_EQ(j["initializers"]["count"], e.init_count);
  EXPECT_EQ(j["initializers"]["bytes"], e.init_bytes);
  EXPECT_EQ(j["ops"], e.ops);
  EXPECT_EQ(j["opsets"], e.opsets);
  EXPECT_EQ(j["nodes"], e.nodes);
  EXPECT_EQ(j["subgraphs"], 0);
}

TEST(InspectJson, MlpMatchesTheDocumentedModel) {
  const json j = inspect_json({"inspect", kMlp, "--format", "json"});
  ASSERT_EQ(j["inputs"].size(), 2u);
  EXPECT_EQ(j["inputs"][0]["name"], "x");
  EXPECT_EQ(j["inputs"][0]["dtype"], "f32");
  EXPECT_EQ(j["inputs"][0]["shape"], json::parse("[32,64]"));
  EXPECT_EQ(j["inputs"][1]["name"], "y");
  EXPECT_EQ(j["inputs"][1]["dtype"], "i64");
  EXPECT_EQ(j["inputs"][1]["shape"], json::parse("[32]"));
  ASSERT_EQ(j["outputs"].size(), 1u);
  EXPECT_EQ(j["outputs"][0], json::parse(R"({"name":"loss","dtype":"f32","shape":[]})"));
  EXPECT_EQ(j["initializers"]["count"], 6);
  EXPECT_EQ(j["initializers"]["bytes"], 9866 * 4);  // 9,866 float parameters
  EXPECT_EQ(j["ops"],
            json::parse(R"({"Add":1,"Constant":3,"Div":1,"Erf":1,"Gemm":2,"LayerNormalization":1,
                                     "Mul":2,"SoftmaxCrossEntropyLoss":1})"));
  EXPECT_EQ(j["opsets"], json::parse(R"({"ai.onnx":17})"));
  EXPECT_EQ(j["nodes"], 12);
  EXPECT_EQ(j["ir_version"], 8);
  EXPECT_EQ(j["producer"], "pytorch 1.13.0");
}

// The real op histograms of the other two models.
TEST(InspectJson, CnnAndGptReportTheirRealOpHistogram) {
  for (const char* name : {"cnn", "gpt"}) {
    SCOPED_TRACE(name);
    const std::string path = source_path(std::string("models/") + name + ".onnx").string();
    const json j = inspect_json({"inspect", path, "--format", "json"});
    const Expected e = expected_from_proto(path);
    EXPECT_EQ(j["ops"], e.ops);
    EXPECT_EQ(j["inputs"], e.inputs);
    EXPECT_EQ(j["initializers"]["count"], e.init_count);
    EXPECT_EQ(j["initializers"]["bytes"], e.init_bytes);
  }
  const json gpt =
      inspect_json({"inspect", source_path("models/gpt.onnx").string(), "--format", "json"});
  EXPECT_EQ(gpt["nodes"], 210);
  EXPECT_EQ(gpt["ops"]["Constant"], 73);
  EXPECT_EQ(gpt["ops"]["MatMul"], 17);
  EXPECT_EQ(gpt["ops"]["Softmax"], 2);
}

TEST(InspectJson, InputShapeOptionChangesTheReportedShapes) {
  const json j = inspect_json(
      {"inspect", kMlp, "--format", "json", "--input-shape", "x=16x64", "--input-shape", "y=16"});
  EXPECT_EQ(j["inputs"][0]["name"], "x");
  EXPECT_EQ(j["inputs"][0]["shape"], json::parse("[16,64]"));
  EXPECT_EQ(j["inputs"][1]["name"], "y");
  EXPECT_EQ(j["inputs"][1]["shape"], json::parse("[16]"));
  EXPECT_EQ(j["outputs"][0]["shape"], json::parse("[]"));
  EXPECT_EQ(j["nodes"], 12);
}

TEST(InspectText, HasTheSummaryAndTheOpTable) {
  const RunResult r = run_ampc({"inspect", kMlp});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("opsets        ai.onnx 17"));
  EXPECT_THAT(r.out, HasSubstr("initializers  6, 38.5 KiB"));
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n  x +f32\[32,64\]\n)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n  y +i64\[32\]\n)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n  loss +f32\[\]\n)"))) << r.out;
  // One row per op type with its count, under an "ops" heading.
  const auto ops_at = r.out.find("\nops\n");
  ASSERT_NE(ops_at, std::string::npos) << r.out;
  const std::string table = r.out.substr(ops_at);
  const std::map<std::string, int> expected = {
      {"Add", 1},  {"Constant", 3},           {"Div", 1}, {"Erf", 1},
      {"Gemm", 2}, {"LayerNormalization", 1}, {"Mul", 2}, {"SoftmaxCrossEntropyLoss", 1}};
  for (const auto& [op, count] : expected) {
    EXPECT_TRUE(
        std::regex_search(table, std::regex("\n  " + op + " +" + std::to_string(count) + "\n")))
        << op << " " << count << " missing from:\n"
        << table;
  }
}

TEST(InspectDot, WritesGraphvizWithNodesColouredByElementType) {
  TempDir tmp;
  const fs::path dot = tmp / "mlp.dot";
  const RunResult r = run_ampc({"inspect", kMlp, "--dot", dot.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(list_dir(tmp.path()), std::vector<std::string>{"mlp.dot"});
  const std::string text = read_bytes(dot);
  EXPECT_EQ(text.rfind("digraph ", 0), 0u) << text.substr(0, 80);
  const std::string fp32 = "#9ecae1";
  const std::string integer = "#bcbddc";
  // Every op node of the mlp computes in fp32; the legend names each colour class.
  int boxes = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("shape=box, style=\"rounded,filled\"") == std::string::npos) continue;
    ++boxes;
    EXPECT_THAT(line, HasSubstr("fillcolor=\"" + fp32 + "\"")) << line;
  }
  EXPECT_EQ(boxes, 12);
  // Inputs are coloured by their own type; labels break lines with DOT's \n escape.
  EXPECT_THAT(text, HasSubstr("fillcolor=\"" + fp32 + "\", label=\"x\\nf32[32,64]\""));
  EXPECT_THAT(text, HasSubstr("fillcolor=\"" + integer + "\", label=\"y\\ni64[32]\""));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("\\\\n"))) << "an escaped backslash shows as text";
  for (const char* cls : {"fp32", "fp16", "bf16", "integer", "bool"}) {
    EXPECT_THAT(text, HasSubstr(std::string("label=\"") + cls + "\""));
  }
  EXPECT_THAT(text, HasSubstr("/fc1/Gemm"));
}

TEST(InspectDot, FollowsTheInputShapeOption) {
  TempDir tmp;
  const fs::path dot = tmp / "mlp.dot";
  const RunResult r = run_ampc({"inspect", kMlp, "--dot", dot.string(), "--input-shape", "x=16x64",
                                "--input-shape", "y=16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = read_bytes(dot);
  EXPECT_THAT(text, HasSubstr("x\\nf32[16,64]"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("f32[32,64]")));
}

TEST(InspectSvg, RendersThroughGraphviz) {
  TempDir tmp;
  const fs::path svg = tmp / "mlp.svg";
  const RunResult r = run_ampc({"inspect", kMlp, "--svg", svg.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(list_dir(tmp.path()), std::vector<std::string>{"mlp.svg"});
  const std::string text = read_bytes(svg);
  EXPECT_THAT(text, HasSubstr("<svg"));
  EXPECT_THAT(text, HasSubstr("</svg>"));
  EXPECT_THAT(text, HasSubstr("fill=\"#9ecae1\""));  // fp32 nodes
  // Each label line is its own <text> element (no literal "\n" in the picture).
  EXPECT_THAT(text, HasSubstr(">/fc1/Gemm</text>"));
  EXPECT_THAT(text, HasSubstr(">f32[32,64]</text>"));
  EXPECT_THAT(text, HasSubstr(">SoftmaxCrossEntropyLoss</text>"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("\\n")));
}

}  // namespace
}  // namespace ampc::testing
