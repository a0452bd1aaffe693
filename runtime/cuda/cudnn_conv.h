// Convolution through cuDNN 9's legacy API, prepared at load: NCHW (1-D as 2-D, or 3-D)
// tensors of f16, bf16 or f32 with fp32 compute (CUDNN_DATA_FLOAT in the convolution
// descriptor), symmetric padding, strides, dilations, groups. The algorithms come from the
// cudnnGet*_v7 heuristics once, preferring deterministic ones within a workspace cap; their
// workspace is carved from the executor's workspace.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace ampc::rt::cuda {

struct ConvShape {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> x, w, y;  // [N, C, spatial...], [M, C / group, kernel...], [N, M, ...]
  std::vector<int64_t> pads, strides, dilations;  // per spatial dimension (pads symmetric)
  int64_t group = 1;
};

class CudnnConv {
 public:
  // Which passes the step runs: forward, or the gradients wrt X and W.
  CudnnConv(cudnnHandle_t handle, const ConvShape& shape, bool forward, bool data_grad,
            bool filter_grad, const std::string& label);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // Workspace the chosen algorithms need (the largest of them).
  size_t workspace_bytes() const { return workspace_; }

  void forward(const void* x, const void* w, void* y, void* workspace, cudaStream_t stream) const;
  // y += b broadcast over [N, M, spatial...] (b: M values of the conv's type); call
  // enable_bias() at load first.
  void enable_bias();
  void add_bias(const void* b, void* y, cudaStream_t stream) const;
  void data_grad(const void* dy, const void* w, void* dx, void* workspace,
                 cudaStream_t stream) const;
  void filter_grad(const void* dy, const void* x, void* dw, void* workspace,
                   cudaStream_t stream) const;

 private:
  cudnnHandle_t handle_;
  std::string label_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, b_ = nullptr;
  cudnnDataType_t type_{};
  int nd_ = 0, channels_ = 0;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo_{};
  size_t workspace_ = 0;
};

}  // namespace ampc::rt::cuda
