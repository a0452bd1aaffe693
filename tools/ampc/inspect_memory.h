// `ampc inspect MODEL|PLAN --memory [--device-memory SIZE]...`: the fp32 and 16-bit training
// plans' bytes by category and the largest batch per device size
// (driver/memory_budget.h).
#pragma once

#include <string>
#include <vector>

#include "driver/pipeline.h"

namespace ampc::cli {

struct MemoryArgs {
  bool memory = false;
  std::vector<std::string> device_memory;  // sizes: "80GiB", "141GB"
  // The training step's options as `ampc compile --train` takes them (optimizer and its
  // state, losses, frozen parameters, accumulation), for an ONNX model; the optimizer is Adam
  // unless --optimizer was given. A plan brings its own.
  compiler::CompileOptions compile;
};

// `precision`: the 16-bit column's ("fp16" or "bf16"; "fp32" means fp16);
// `input_shapes`: --input-shape specs.
void inspect_memory(const std::string& model, const MemoryArgs& args, const std::string& precision,
                    const std::vector<std::string>& input_shapes, const std::string& format);

}  // namespace ampc::cli
