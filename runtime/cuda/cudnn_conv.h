// Convolution through cuDNN 9's legacy API, prepared at load: NCHW (1-D as 2-D, or 3-D)
// tensors of f16, bf16 or f32 with fp32 compute (CUDNN_DATA_FLOAT in the convolution
// descriptor), symmetric padding, strides, dilations, groups. Each pass (forward, backward
// data, backward filter) has its own convolution descriptor: its algorithm comes from the
// cudnnGet*_v7 heuristics once (cudnn_algo.h: deterministic first, within a workspace cap, no
// TF32 for fp32), the descriptor then gets that answer's math type, and the pass's workspace
// is what cudnnGet*WorkspaceSize says for that algorithm and descriptor. The workspace is
// carved from the executor's. The bias is not cuDNN's (kernels/cuda/bias.h).
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

  // Workspace the chosen algorithms need (the largest of the passes').
  size_t workspace_bytes() const { return workspace_; }

  void forward(const void* x, const void* w, void* y, void* workspace, cudaStream_t stream) const;
  void data_grad(const void* dy, const void* w, void* dx, void* workspace,
                 cudaStream_t stream) const;
  void filter_grad(const void* dy, const void* x, void* dw, void* workspace,
                   cudaStream_t stream) const;

 private:
  // A pass's convolution descriptor (the geometry, then the chosen answer's math type).
  cudnnConvolutionDescriptor_t make_conv();

  cudnnHandle_t handle_;
  std::string label_;
  ConvShape shape_;
  std::vector<int> pads_, strides_, dilations_;
  cudnnMathType_t search_math_{};
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t fwd_ = nullptr, data_ = nullptr, filter_ = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo_{};
  size_t fwd_ws_ = 0, data_ws_ = 0, filter_ws_ = 0, workspace_ = 0;
};

}  // namespace ampc::rt::cuda
