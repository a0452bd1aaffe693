// Errors of the CUDA runtime, cuBLASLt and cuDNN as ampc::Error, naming the call that failed.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

namespace ampc::rt::cuda {

// Throws ampc::Error "<what>: <library's message>" unless the call succeeded.
void check(cudaError_t status, const std::string& what);
void check(cublasStatus_t status, const std::string& what);
void check(cudnnStatus_t status, const std::string& what);

}  // namespace ampc::rt::cuda
