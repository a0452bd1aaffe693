#include "runtime/cuda/device.h"

#include <cuda_runtime_api.h>

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

DeviceInfo open_device(int index) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    const std::string why =
        status != cudaSuccess ? cudaGetErrorString(status) : "the driver reports no devices";
    throw Error("no CUDA device (" + why + "); use --device cpu");
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

}  // namespace ampc::rt::cuda
