// The step view page in a real browser: headless Chromium (Debian's chromium) opens the page
// of the gpt's fp16 training step (Adam: over a thousand nodes) with every proxy pointed at a
// closed port, a script drives it (step_view_driver.js: expand a scope, search, open results), and
// the test reads what the page shows from Chromium's DOM dump. The nodes every search must find
// come from the training step ampc exports (ONNX training format, read with ONNX's protobuf
// classes); the dtypes shown are PyTorch autocast's (Softmax fp32, MatMul fp16). The render time is
// printed, not asserted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// Runs a shell command, returning its stdout.
std::string capture(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return {};
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  ::pclose(pipe);
  return out;
}

std::string unescape_html(std::string s) {
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"&lt;", "<"},
                                 {"&gt;", ">"},
                                 {"&quot;", "\""},
                                 {"&amp;", "&"}}) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  }
  return s;
}

TEST(StepViewBrowser, GptFp16TrainingStepPage) {
  ASSERT_EQ(std::system("command -v chromium >/dev/null"), 0)
      << "needs Debian's chromium (scripts/install-deps.sh installs it)";
  TempDir dir;
  const std::string gpt = source_path("models/gpt.onnx").string();
  const std::string page = (dir / "gpt.html").string();
  expect_success(
      {"inspect", gpt, "--train", "--precision", "fp16", "--optimizer", "adam", "--html", page});
  expect_success({"compile", gpt, "--train", "--precision", "fp16", "--optimizer", "adam", "-o",
                  (dir / "gpt.plan").string(), "--emit-onnx", (dir / "gpt.train.onnx").string()});

  // Self-contained: no element that loads anything (the SVG namespace is a name, not a fetch).
  const std::string html = read_bytes(page);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);

  json expect;
  expect["nodes"] = json::array();
  const onnx::ModelProto step = read_proto(dir / "gpt.train.onnx");
  for (const auto& n : step.graph().node()) expect["nodes"].push_back(n.name());
  for (const auto& n : step.training_info(0).algorithm().node())
    expect["nodes"].push_back(n.name());
  expect["scope"] = "p:forward|/blocks.0/attn";
  expect["scopeNode"] = "/blocks.0/attn/Softmax";
  expect["searchFor"] = "/blocks.1/attn/Softmax";
  const std::string driver = read_bytes(source_path("tests/cli/step_view_driver.js"));
  std::string driven = html;
  const size_t body_end = driven.rfind("</body>");
  ASSERT_NE(body_end, std::string::npos);
  driven.insert(body_end, "<pre id=\"test-out\"></pre>\n<script>\nconst EXPECT = " + expect.dump() +
                              ";\n" + driver + "</script>\n");
  const std::string driven_path = (dir / "driven.html").string();
  write_bytes(driven_path, driven);

  // No network: every proxy goes to a closed port, and the page must have requested nothing.
  const std::string command =
      "timeout 90 chromium --headless --disable-gpu --no-first-run --no-default-browser-check "
      "--disable-dev-shm-usage --proxy-server=127.0.0.1:9 --user-data-dir=" +
      (dir / "profile").string() + " --no-sandbox" +
      " --window-size=1600,1000 --dump-dom 'file://" + driven_path + "' 2>/dev/null";
  const std::string dom = capture(command);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m, std::regex("<pre id=\"test-out\">([^<]*)</pre>")))
      << "no driver output in the DOM dump (" << dom.size() << " bytes)";
  const json out = json::parse(unescape_html(m[1].str()));
  ASSERT_FALSE(out.contains("error")) << out["error"];

  std::cout << "gpt fp16 training step: " << out["nodes"] << " nodes, rendered in "
            << out["renderMs"] << " ms from navigation start (" << out["visibleAtLoad"]
            << " nodes drawn at load); expanding a scope re-laid out in " << out["expandMs"]
            << " ms; the whole step expanded (" << out["visibleExpanded"] << " nodes) in "
            << out["expandAllMs"] << " ms\n";
  RecordProperty("render_ms", std::to_string(out["renderMs"].get<double>()));

  EXPECT_TRUE(out["resources"].empty()) << out["resources"];
  EXPECT_GE(out["nodes"].get<size_t>(), expect["nodes"].size());
  EXPECT_TRUE(out["missing"].empty()) << out["missing"];
  EXPECT_TRUE(out["notRevealed"].empty()) << out["notRevealed"];
  // The scope opens collapsed; expanding it draws its nodes.
  EXPECT_FALSE(out["scopeNodeVisibleAtLoad"].get<bool>());
  EXPECT_TRUE(out["expanded"].get<bool>());
  EXPECT_TRUE(out["scopeNodeVisibleAfterExpand"].get<bool>());
  EXPECT_GE(out["results"].get<int>(), 1);
  EXPECT_GT(out["castFills"].get<int>(), 1);        // casts of different sizes, different shades
  EXPECT_EQ(out["visibleExpanded"], out["nodes"]);  // expanded, every node is drawn

  // What the page shows at the end: the searched node drawn, selected, with its details.
  EXPECT_TRUE(std::regex_search(
      dom,
      std::regex("<g class=\"node[^\"]*selected[^\"]*\" data-node=\"/blocks.1/attn/Softmax\"")));
  EXPECT_THAT(dom, HasSubstr("<h3 id=\"detail-name\">/blocks.1/attn/Softmax</h3>"));
  EXPECT_THAT(dom, HasSubstr("<td>dtype</td><td>fp32</td>"));
  EXPECT_THAT(dom, HasSubstr("DENY (table)"));
  EXPECT_THAT(dom, HasSubstr("data-node=\"/blocks.1/attn/MatMul\""));
  EXPECT_TRUE(std::regex_search(dom, std::regex("MatMul \u00B7 fp16")));
  // The skip-step's found_inf edges, and the phases.
  EXPECT_THAT(dom, HasSubstr("class=\"edge found-inf\""));
  for (const char* phase : {"forward", "backward", "loss scaling", "optimizer", "skip-step"})
    EXPECT_THAT(dom, HasSubstr("data-group=\"p:" + std::string(phase) + "\"")) << phase;
}

}  // namespace
}  // namespace ampc::testing
