// `--device cpu|cuda[:N]`: which backend runs a plan, for `ampc train` and `ampc run`.
#pragma once

#include <memory>
#include <string>

#include "runtime/backend.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::cli {

struct Device {
  bool cuda = false;
  int index = 0;
  std::string spec = "cpu";
};

// Parses the option's value; throws ampc::Error for anything but cpu, cuda, cuda:N.
Device parse_device(const std::string& spec);

// The --target an ONNX model is compiled for to run on `device`: "cpu", or "cuda:sm_90" /
// "cuda:sm_80" for the GPU at hand. For CUDA this opens the device, so a machine without one
// fails here, with "no CUDA device", before anything is compiled; an ampc built without the
// CUDA backend says so.
std::string compile_target(const Device& device);

// The executor of `plan` on `device`; pipeline_depth: runs a CUDA executor keeps in flight.
// First refuses a plan whose memory does not fit the device (memory_check.h); `model` is
// the file the plan came from, for the `ampc inspect --memory` command the refusal names.
std::unique_ptr<rt::Backend> make_backend(plan::Plan plan, const Device& device,
                                          int64_t pipeline_depth = 1,
                                          const std::string& model = "");

// One line on what the device did ("cuda:0 (NVIDIA H200): 100 steps, 100 graph launches, 11
// host synchronisations, ..."); empty for the CPU.
std::string device_summary(const rt::Backend& backend);

}  // namespace ampc::cli
