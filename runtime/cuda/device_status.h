// What cudaGetDeviceCount's answer means, header-only so that the kernel tests (which do not
// link the backend) decide as the backend does. Only a machine without a GPU or without any
// NVIDIA driver (cudaDriverGetVersion says 0) has no device; anything else that fails (a
// driver older than this build's CUDA runtime, a broken installation) is an error to report,
// never a reason to skip.
#pragma once

#include <cuda_runtime_api.h>

namespace ampc::rt::cuda {

enum class DeviceStatus { kUsable, kNoDevice, kUnusable };

inline DeviceStatus classify_device_count(cudaError_t status, int count, int driver_version) {
  if (status == cudaSuccess) return count > 0 ? DeviceStatus::kUsable : DeviceStatus::kNoDevice;
  if (status == cudaErrorNoDevice) return DeviceStatus::kNoDevice;
  // cudart says "insufficient driver" both for an old driver and for none at all; only the
  // latter (no libcuda: driver version 0) is a machine without a GPU.
  if (status == cudaErrorInsufficientDriver && driver_version == 0) return DeviceStatus::kNoDevice;
  return DeviceStatus::kUnusable;
}

// This machine's answer; `status` (may be null) gets cudaGetDeviceCount's code.
inline DeviceStatus query_device_status(cudaError_t* status = nullptr) {
  int count = 0, driver = 0;
  const cudaError_t s = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  (void)cudaDriverGetVersion(&driver);
  if (status) *status = s;
  return classify_device_count(s, count, driver);
}

}  // namespace ampc::rt::cuda
