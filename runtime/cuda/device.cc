#include "runtime/cuda/device.h"

#include <cublasLt.h>
#include <cudnn.h>

#include <cctype>

#include "base/error.h"
#include "runtime/cuda/cuda_check.h"

namespace ampc::rt::cuda {

int parse_device(const std::string& spec) {
  if (spec == "cuda") return 0;
  const std::string prefix = "cuda:";
  const bool digits = spec.size() > prefix.size() && spec.size() <= prefix.size() + 4 &&
                      spec.compare(0, prefix.size(), prefix) == 0;
  bool ok = digits;
  for (size_t i = prefix.size(); ok && i < spec.size(); ++i)
    ok = std::isdigit(static_cast<unsigned char>(spec[i])) != 0;
  if (!ok) throw Error("--device '" + spec + "': expected cpu, cuda or cuda:N");
  return std::stoi(spec.substr(prefix.size()));
}

std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

DeviceInfo open_device(int index) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  int driver = 0, runtime = 0;
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  switch (classify_device_count(status, count, driver)) {
    case DeviceStatus::kNoDevice: {
      const std::string why = status == cudaSuccess ? "the driver reports no devices"
                              : driver == 0         ? "no NVIDIA driver is installed"
                                                    : cudaGetErrorString(status);
      throw Error("no CUDA device (" + why + "); use --device cpu");
    }
    case DeviceStatus::kUnusable:
      throw Error(
          "CUDA is not usable here: cudaGetDeviceCount: " + std::string(cudaGetErrorName(status)) +
          " (" + cudaGetErrorString(status) + "); driver supports CUDA " +
          cuda_version_string(driver) + ", ampc was built with CUDA runtime " +
          cuda_version_string(runtime) + (driver < runtime ? " (update the driver)" : ""));
    case DeviceStatus::kUsable:
      break;
  }
  if (index < 0 || index >= count) {
    throw Error("no CUDA device " + std::to_string(index) + ": this machine has " +
                std::to_string(count) + " (cuda:0" +
                (count > 1 ? " to cuda:" + std::to_string(count - 1) : std::string()) + ")");
  }
  check(cudaSetDevice(index), "cudaSetDevice(" + std::to_string(index) + ")");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  DeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.total_memory = prop.totalGlobalMem;
  return info;
}

std::string runtime_versions() {
  int driver = 0, runtime = 0;
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  return "driver supports CUDA " + (driver ? cuda_version_string(driver) : std::string("-")) +
         ", runtime " + cuda_version_string(runtime) + ", cuBLASLt " +
         std::to_string(cublasLtGetVersion()) + ", cuDNN " + std::to_string(cudnnGetVersion()) +
         " (built with " + std::to_string(CUDNN_VERSION) + ")";
}

}  // namespace ampc::rt::cuda
