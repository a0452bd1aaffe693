// Free device memory as the CUDA runtime reports it (cudaMemGetInfo), for the check before a
// plan is loaded (runtime/memory_fit.h).
#pragma once

#include "runtime/memory_fit.h"

namespace ampc::rt::cuda {

// The free memory of device `index` ("cudaMemGetInfo: N of M free"); throws ampc::Error
// when the device cannot be queried.
AvailableMemory free_device_memory(int index);

}  // namespace ampc::rt::cuda
