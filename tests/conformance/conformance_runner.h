// Runs one ONNX backend test case (a folder with model.onnx and test_data_set_*/ of .pb
// tensors) through the compiler and the CPU executor, and compares with ONNX's expected
// outputs.
#pragma once

#include <string>

namespace ampc::conformance {

enum class Outcome { kPassed, kFailed, kUnsupported };

struct CaseResult {
  Outcome outcome = Outcome::kPassed;
  std::string message;      // why it failed, or what is unsupported
  std::string unsupported;  // the op (or feature) an unsupported case lacks, for the table
};

struct Tolerance {
  double rtol = 1e-3;  // ONNX backend tests' defaults
  double atol = 1e-7;
};

CaseResult run_case(const std::string& case_dir, const Tolerance& tol = {});

}  // namespace ampc::conformance
