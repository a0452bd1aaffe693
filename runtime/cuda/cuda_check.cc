#include "runtime/cuda/cuda_check.h"

#include "base/error.h"

namespace ampc::rt::cuda {

void check(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();  // a sticky error stays; a non-sticky one is cleared for the next call
  throw Error(what + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

void check(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(what + ": " + cublasLtGetStatusName(status) + " (" + cublasLtGetStatusString(status) +
              ")");
}

void check(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw Error(what + ": " + cudnnGetErrorString(status));
}

}  // namespace ampc::rt::cuda
