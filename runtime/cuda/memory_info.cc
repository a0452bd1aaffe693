#include "runtime/cuda/memory_info.h"

#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"

namespace ampc::rt::cuda {

AvailableMemory free_device_memory(int index) {
  check(cudaSetDevice(index), "cudaSetDevice(" + std::to_string(index) + ")");
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return {static_cast<int64_t>(free),
          "cudaMemGetInfo: " + format_bytes(static_cast<int64_t>(free)) + " of " +
              format_bytes(static_cast<int64_t>(total)) + " free"};
}

}  // namespace ampc::rt::cuda
