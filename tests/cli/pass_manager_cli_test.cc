// `ampc compile`'s pass manager options, run as a separate process on models/mlp.onnx:
// --print-after (stderr, or --print-to FILE), --list-passes, --verify-each, and the
// --time-passes table with one row per pass.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::vector<std::string> compile_fp16(const TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> args{"compile",     source_path("models/mlp.onnx").string(),
                                "-o",          (dir / "mlp.plan").string(),
                                "--precision", "fp16"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(PassManagerCli, PrintAfterAutocastShowsTheCasts) {
  TempDir dir;
  const RunResult r = run_ampc(compile_fp16(dir, {"--print-after", "autocast"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, StartsWith("# IR after pass 'autocast'\nmodel "));
  EXPECT_THAT(r.err, HasSubstr("Cast"));
  EXPECT_THAT(r.err, HasSubstr("f16["));
  EXPECT_THAT(r.out, StartsWith("wrote "));  // stdout is as without the option
}

TEST(PassManagerCli, PrintToWritesTheFileInstead) {
  TempDir dir;
  const std::string file = (dir / "ir.txt").string();
  const RunResult r = run_ampc(compile_fp16(
      dir, {"--print-after", "autocast", "--print-after", "cast-cleanup", "--print-to", file}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string text = read_bytes(file);
  const auto first = text.find("# IR after pass 'autocast'\n");
  const auto second = text.find("# IR after pass 'cast-cleanup'\n");
  EXPECT_EQ(first, 0u);
  ASSERT_NE(second, std::string::npos);
  EXPECT_LT(first, second);
}

TEST(PassManagerCli, UnknownPassIsOneLineListingTheNames) {
  TempDir dir;
  const std::string err = expect_user_error(compile_fp16(dir, {"--print-after", "autocats"}));
  EXPECT_THAT(err, HasSubstr("unknown pass 'autocats'"));
  EXPECT_THAT(err, HasSubstr("all, mark-phases, fold-static-shapes"));
  EXPECT_THAT(err, HasSubstr("recompute-casts"));
  EXPECT_FALSE(std::filesystem::exists(dir / "mlp.plan"));
}

TEST(PassManagerCli, ListPassesNeedsNoModel) {
  const std::string out = expect_success({"compile", "--list-passes"});
  const std::vector<std::string> names = lines_of(out);
  ASSERT_GT(names.size(), 10u);
  EXPECT_EQ(names.front(), "mark-phases");
  EXPECT_EQ(names.back(), "recompute-elementwise");
  EXPECT_NE(std::find(names.begin(), names.end(), "recompute-casts"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "autocast"), names.end());
}

TEST(PassManagerCli, TimePassesHasARowPerPassAndVerifyEachChangesNothing) {
  TempDir dir;
  const std::string out =
      expect_success(compile_fp16(dir, {"--train", "--time-passes", "--verify-each"}));
  const std::string plan = read_bytes(dir / "mlp.plan");
  for (const char* row :
       {"\nimport ", "\nmark-phases ", "\nautocast ", "\nautodiff ", "\nrecompute-casts ",
        "\nplan emission ", "\nmemory plan ", "\nwrite plan ", "\ntotal "})
    EXPECT_THAT(out, HasSubstr(row)) << row;
  expect_success(compile_fp16(dir, {"--train"}));
  EXPECT_TRUE(read_bytes(dir / "mlp.plan") == plan);
}

TEST(PassManagerCli, PrintToNeedsPrintAfter) {
  TempDir dir;
  const std::string err =
      expect_user_error(compile_fp16(dir, {"--print-to", (dir / "ir.txt").string()}));
  EXPECT_THAT(err, HasSubstr("--print-to needs --print-after"));
}

}  // namespace
}  // namespace ampc::testing
