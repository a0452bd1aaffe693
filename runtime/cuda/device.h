// The CUDA device a plan runs on: `--device cuda[:N]` parsed, the device checked to exist
// (cudart only: without a driver or a GPU this says "no CUDA device" instead of crashing;
// an unusable driver, an old one above all, is an error of its own, never "no device"), and
// what the backend needs to know of it.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "runtime/cuda/device_status.h"

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

// "13.1" from CUDA's 13010.
std::string cuda_version_string(int version);

// Makes device `index` current and describes it. Throws ampc::Error "no CUDA device (...);
// use --device cpu" when the machine has no GPU or no driver, "CUDA is not usable here: ..."
// (naming the driver and runtime versions) for any other failure, and names the valid range
// when `index` is out of it.
DeviceInfo open_device(int index);

// The versions this process runs with, for logs: "driver 13.1, runtime 13.1, cuBLASLt 130100,
// cuDNN 91900". The library versions are those of the libraries loaded, not of the headers.
std::string runtime_versions();

}  // namespace ampc::rt::cuda
