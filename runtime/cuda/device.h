// The CUDA device a plan runs on: `--device cuda[:N]` parsed, the device checked to exist
// (cudart only: without a driver or a GPU this says "no CUDA device" instead of crashing),
// and what the backend needs to know of it.
#pragma once

#include <string>

namespace ampc::rt::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int sm_count = 0;
  size_t total_memory = 0;

  int arch() const { return major * 10 + minor; }  // 90 for sm_90
};

// The device index of "cuda" (0) or "cuda:N"; throws ampc::Error for anything else.
int parse_device(const std::string& spec);

// Makes device `index` current and describes it. Throws ampc::Error "no CUDA device (...);
// use --device cpu" when the machine has no usable GPU or driver, and names the valid range
// when `index` is out of it.
DeviceInfo open_device(int index);

}  // namespace ampc::rt::cuda
