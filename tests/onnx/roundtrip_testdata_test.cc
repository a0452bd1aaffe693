// Round trip of every model in ONNX's own backend test data (Debian libonnx-testdata):
// import -> export -> ONNX full check -> re-import, and the two IRs print identically.
//
// Models with sequence, map, optional or sparse values may be refused, with a clear
// ampc::Error; such refusals are counted per reason. So are models that ONNX's own full
// check rejects ("invalid ONNX": no export of them can pass it). Any other failure fails the
// test and is listed with its case name and message. One test per folder so CTest can run
// them in parallel; each prints its table (total / round-tripped / refused by reason).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "frontend/onnx/export.h"
#include "frontend/onnx/import.h"
#include "frontend/onnx/read_model.h"
#include "ir/printer.h"
#include "tests/onnx/roundtrip_check.h"

namespace ampc {
namespace {
namespace fs = std::filesystem;

// Refusal reasons the issue allows, recognised by the fragment each error message carries.
struct Reason {
  const char* label;
  const char* fragment;
};
const Reason kAllowedReasons[] = {
    {"sequence type", "has sequence type"},  {"map type", "has map type"},
    {"optional type", "has optional type"},  {"sparse tensor", "has sparse tensor type"},
    {"sparse tensor", "sparse initializer"}, {"sparse tensor", "sparse tensor attributes"},
};

// The label of an allowed refusal, or nullptr when the message is not one.
const char* refusal_reason(const std::string& message) {
  for (const auto& r : kAllowedReasons) {
    if (message.find(r.fragment) != std::string::npos) return r.label;
  }
  return nullptr;
}

// Refused because the file itself fails onnx.checker.check_model(full_check=True).
constexpr const char* kInvalidReason = "invalid ONNX";

struct Outcome {
  enum Kind { kPassed, kRefused, kFailed } kind = kPassed;
  std::string detail;           // refusal reason or failure message
  bool dynamic_inputs = false;  // needed require_static_inputs=false
};

bool is_dynamic_input_error(const std::string& message) {
  return message.find("has dynamic dimension") != std::string::npos ||
         message.find("has no shape (unknown rank)") != std::string::npos;
}

// load -> export -> full check -> serialise, parse, re-import -> compare.
Outcome round_trip(const fs::path& model_path) {
  Outcome out;
  try {
    onnx_io::ImportOptions options;
    std::unique_ptr<ir::Model> first;
    try {
      first = onnx_io::load_model(model_path.string(), options);
    } catch (const Error& e) {
      if (!is_dynamic_input_error(e.what())) throw;
      // A symbolic input dimension ('N', 'batch'): the compiler needs --input-shape, but the
      // round trip can keep the dimension symbolic.
      out.dynamic_inputs = true;
      options.require_static_inputs = false;
      first = onnx_io::load_model(model_path.string(), options);
    }
    const onnx::ModelProto exported = onnx_io::export_model(*first);
    onnx_io::check_model(exported);
    // The export keeps everything the file said (so the first import lost nothing).
    const onnx::ModelProto original = onnx_io::read_model_proto(model_path.string());
    if (auto d = testing::structure_difference(original, exported); !d.empty()) {
      return {Outcome::kFailed, "export differs from the original file: " + d};
    }
    std::string bytes;
    if (!exported.SerializeToString(&bytes)) return {Outcome::kFailed, "export does not serialise"};
    onnx::ModelProto reread;
    if (!reread.ParseFromString(bytes)) return {Outcome::kFailed, "exported bytes do not parse"};
    const auto second = onnx_io::import_model(reread, options);
    const std::string a = ir::to_text(*first);
    const std::string b = ir::to_text(*second);
    if (a != b)
      return {Outcome::kFailed, "re-imported IR differs at " + testing::first_difference(a, b)};
    // Export is a fixed point: the re-imported model exports to the same bytes.
    std::string bytes2;
    onnx_io::export_model(*second).SerializeToString(&bytes2);
    if (bytes2 != bytes) return {Outcome::kFailed, "the second export differs from the first"};
  } catch (const Error& e) {
    const std::string message = e.what();
    if (const char* reason = refusal_reason(message))
      return {Outcome::kRefused, reason, out.dynamic_inputs};
    // A model that ONNX's own full check rejects cannot be exported so that it passes that
    // check; refusing it is right. Anything else is a bug.
    try {
      onnx_io::check_model(onnx_io::read_model_proto(model_path.string()));
    } catch (const Error&) {
      return {Outcome::kRefused, kInvalidReason, out.dynamic_inputs};
    }
    return {Outcome::kFailed, "ampc::Error: " + message};
  } catch (const std::exception& e) {
    return {Outcome::kFailed, std::string("unexpected exception (not ampc::Error): ") + e.what()};
  }
  return out;
}

std::vector<fs::path> cases_in(const fs::path& folder) {
  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (fs::exists(entry.path() / "model.onnx")) cases.push_back(entry.path());
  }
  std::sort(cases.begin(), cases.end());
  return cases;
}

class TestdataRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(TestdataRoundTrip, EveryModelRoundTripsOrIsRefusedForAnAllowedReason) {
  const fs::path folder = fs::path(AMPC_ONNX_TESTDATA) / GetParam();
  ASSERT_TRUE(fs::is_directory(folder)) << folder << " is missing: install libonnx-testdata "
                                        << "or set the CMake cache variable AMPC_ONNX_TESTDATA";
  const auto cases = cases_in(folder);
  ASSERT_FALSE(cases.empty()) << "no */model.onnx under " << folder;

  const auto start = std::chrono::steady_clock::now();
  int passed = 0;
  int dynamic = 0;                                          // models with symbolic input dimensions
  int dynamic_passed = 0;                                   // ... of which round-tripped
  std::map<std::string, std::vector<std::string>> refused;  // reason -> cases
  std::vector<std::string> failures;
  for (const auto& c : cases) {
    const Outcome o = round_trip(c / "model.onnx");
    dynamic += o.dynamic_inputs;
    dynamic_passed += o.dynamic_inputs && o.kind == Outcome::kPassed;
    switch (o.kind) {
      case Outcome::kPassed:
        ++passed;
        break;
      case Outcome::kRefused:
        refused[o.detail].push_back(c.filename().string());
        break;
      case Outcome::kFailed:
        failures.push_back(c.filename().string() + ": " + o.detail);
        break;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  int refused_total = 0;
  for (const auto& [reason, names] : refused) refused_total += static_cast<int>(names.size());
  std::ostringstream table;
  table << "\n  data/" << GetParam() << " (" << std::fixed << std::setprecision(1) << seconds
        << " s)\n"
        << "    total          " << std::setw(5) << cases.size() << '\n'
        << "    round-tripped  " << std::setw(5) << passed << "   (" << dynamic_passed
        << " of them with symbolic input dimensions, imported with require_static_inputs=false)\n"
        << "    refused        " << std::setw(5) << refused_total << '\n';
  for (const auto& [reason, names] : refused) {
    table << "      " << std::left << std::setw(14) << reason << std::right << std::setw(4)
          << names.size() << "  (";
    for (size_t i = 0; i < names.size(); ++i) table << (i ? " " : "") << names[i];
    table << ")\n";
  }
  table << "    failed         " << std::setw(5) << failures.size() << '\n'
        << "    (" << dynamic << " model(s) in all have symbolic input dimensions; '"
        << kInvalidReason << "' = the file fails ONNX's own full check too)\n";
  std::cout << table.str();

  std::ostringstream list;
  for (const auto& f : failures) list << "\n  " << f;
  EXPECT_TRUE(failures.empty()) << failures.size() << " model(s) in data/" << GetParam()
                                << " failed the round trip:" << list.str();
  EXPECT_EQ(passed + refused_total + static_cast<int>(failures.size()),
            static_cast<int>(cases.size()));
  // Refusals are the exception: most of each folder must round-trip.
  EXPECT_GT(passed, refused_total);
}

INSTANTIATE_TEST_SUITE_P(Folders, TestdataRoundTrip,
                         ::testing::Values("node", "pytorch-converted", "pytorch-operator",
                                           "simple"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace ampc
