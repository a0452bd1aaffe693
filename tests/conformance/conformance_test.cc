// ONNX backend conformance: every case of ONNX's test data whose ops the CPU backend
// supports must match the expected outputs. Prints supported / passed / failed counts per
// folder. Environment:
//   AMPC_CONFORMANCE_FILTER=REGEX   only cases whose name matches
//   AMPC_CONFORMANCE_VERBOSE=1      print every case's outcome
//   AMPC_CONFORMANCE_TABLE=FILE     write the Markdown table of unsupported cases by op
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>

#include "tests/conformance/conformance_runner.h"

namespace fs = std::filesystem;
using ampc::conformance::Outcome;

namespace {

struct FolderResult {
  int total = 0, passed = 0, failed = 0, unsupported = 0;
  std::vector<std::string> failures;
  std::map<std::string, std::vector<std::string>> unsupported_by_op;
};

FolderResult run_folder(const std::string& folder) {
  FolderResult r;
  const char* filter = std::getenv("AMPC_CONFORMANCE_FILTER");
  const bool verbose = std::getenv("AMPC_CONFORMANCE_VERBOSE") != nullptr;
  const std::regex pattern(filter ? filter : ".*");
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(fs::path(AMPC_ONNX_TESTDATA) / folder)) {
    if (e.is_directory() && std::regex_search(e.path().filename().string(), pattern))
      cases.push_back(e.path());
  }
  std::sort(cases.begin(), cases.end());
  for (const auto& c : cases) {
    const std::string name = c.filename().string();
    const auto res = ampc::conformance::run_case(c.string());
    ++r.total;
    switch (res.outcome) {
      case Outcome::kPassed:
        ++r.passed;
        break;
      case Outcome::kFailed:
        ++r.failed;
        r.failures.push_back(name + ": " + res.message);
        break;
      case Outcome::kUnsupported:
        ++r.unsupported;
        r.unsupported_by_op[res.unsupported].push_back(name);
        break;
    }
    if (verbose) {
      const char* word = res.outcome == Outcome::kPassed   ? "PASS"
                         : res.outcome == Outcome::kFailed ? "FAIL"
                                                           : "UNSUP";
      std::cout << word << ' ' << name << (res.message.empty() ? "" : ": " + res.message) << '\n';
    }
  }
  std::cout << folder << ": " << r.total << " cases, " << (r.total - r.unsupported)
            << " supported, " << r.passed << " passed, " << r.failed << " failed, " << r.unsupported
            << " unsupported\n";
  for (const auto& f : r.failures) std::cout << "  FAILED " << f << '\n';
  return r;
}

void append_table(const std::string& folder, const FolderResult& r) {
  const char* path = std::getenv("AMPC_CONFORMANCE_TABLE");
  if (!path) return;
  std::ofstream out(path, std::ios::app);
  out << "\n## " << folder << "\n\n"
      << r.total << " cases: " << (r.total - r.unsupported) << " supported, " << r.passed
      << " passed, " << r.failed << " failed, " << r.unsupported << " unsupported.\n\n";
  if (r.unsupported_by_op.empty()) return;
  out << "| unsupported (op or feature) | cases |\n|---|---|\n";
  for (const auto& [op, cases] : r.unsupported_by_op) {
    out << "| " << op << " | ";
    for (size_t i = 0; i < cases.size(); ++i) out << (i ? ", " : "") << cases[i];
    out << " |\n";
  }
}

void check_folder(const std::string& folder, bool all_must_be_supported) {
  const FolderResult r = run_folder(folder);
  append_table(folder, r);
  EXPECT_EQ(r.failed, 0) << "supported cases that do not match ONNX's expected outputs in "
                         << folder;
  if (all_must_be_supported) {
    for (const auto& [op, cases] : r.unsupported_by_op)
      ADD_FAILURE() << folder << ": unsupported " << op << " in " << cases[0];
  }
}

}  // namespace

TEST(Conformance, PytorchConverted) {
  check_folder("pytorch-converted", true);
}
TEST(Conformance, PytorchOperator) {
  check_folder("pytorch-operator", true);
}
TEST(Conformance, Node) {
  check_folder("node", false);
}
TEST(Conformance, Simple) {
  check_folder("simple", false);
}
