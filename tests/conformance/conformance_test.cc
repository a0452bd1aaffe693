// ONNX backend conformance: every case of ONNX's test data whose ops the CPU backend
// supports must match the expected outputs. Prints supported / passed / failed counts per
// folder. The floor: every case listed in tests/conformance/passing.txt must pass (a case
// that moves to "unsupported" because an import or compile now throws fails the test);
// a passing case not in the list is reported as a new pass, not a failure (README.md in
// this folder says how to refresh the list). Environment:
//   AMPC_CONFORMANCE_FILTER=REGEX   only cases whose name matches (the floor too)
//   AMPC_CONFORMANCE_VERBOSE=1      print every case's outcome
//   AMPC_CONFORMANCE_TABLE=FILE     write the Markdown table of unsupported cases by op
//   AMPC_CONFORMANCE_PASSING=FILE   append every passing case ("folder/case") to FILE
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "tests/conformance/conformance_runner.h"

namespace fs = std::filesystem;
using ampc::conformance::Outcome;

namespace {

struct FolderResult {
  int total = 0, passed = 0, failed = 0, unsupported = 0;
  std::vector<std::string> failures;
  std::map<std::string, std::vector<std::string>> unsupported_by_op;
  std::set<std::string> passing;                   // case names
  std::map<std::string, std::string> not_passing;  // case name -> why (failed or unsupported)
};

// tests/conformance/passing.txt: "folder/case" per line; '#' starts a comment line.
std::set<std::string> pinned_passing(const std::string& folder) {
  std::ifstream in(std::string(AMPC_SOURCE_DIR) + "/tests/conformance/passing.txt");
  EXPECT_TRUE(in.good()) << "cannot read tests/conformance/passing.txt";
  std::set<std::string> cases;
  const std::string prefix = folder + "/";
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind(prefix, 0) == 0) cases.insert(line.substr(prefix.size()));
  }
  return cases;
}

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
        r.passing.insert(name);
        break;
      case Outcome::kFailed:
        ++r.failed;
        r.failures.push_back(name + ": " + res.message);
        r.not_passing[name] = "failed: " + res.message;
        break;
      case Outcome::kUnsupported:
        ++r.unsupported;
        r.unsupported_by_op[res.unsupported].push_back(name);
        r.not_passing[name] = "unsupported: " + res.message;
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

void append_passing(const std::string& folder, const FolderResult& r) {
  const char* path = std::getenv("AMPC_CONFORMANCE_PASSING");
  if (!path) return;
  std::ofstream out(path, std::ios::app);
  for (const auto& name : r.passing) out << folder << '/' << name << '\n';
}

// The floor: no pinned case may stop passing; new passes are printed for the list.
void check_floor(const std::string& folder, const FolderResult& r) {
  const char* filter = std::getenv("AMPC_CONFORMANCE_FILTER");
  const std::regex pattern(filter ? filter : ".*");
  const std::set<std::string> pinned = pinned_passing(folder);
  int checked = 0;
  for (const auto& name : pinned) {
    if (!std::regex_search(name, pattern)) continue;
    ++checked;
    if (r.passing.count(name)) continue;
    const auto it = r.not_passing.find(name);
    ADD_FAILURE() << folder << '/' << name
                  << " is pinned as passing (tests/conformance/passing.txt) but "
                  << (it == r.not_passing.end() ? "was not found" : it->second);
  }
  int added = 0;
  for (const auto& name : r.passing) {
    if (pinned.count(name)) continue;
    ++added;
    std::cout << "  NEW PASS " << folder << '/' << name
              << " (not yet in tests/conformance/passing.txt)\n";
  }
  std::cout << folder << ": floor " << checked << " pinned cases checked, " << added
            << " new passes\n";
}

void check_folder(const std::string& folder, bool all_must_be_supported) {
  const FolderResult r = run_folder(folder);
  append_table(folder, r);
  append_passing(folder, r);
  check_floor(folder, r);
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
