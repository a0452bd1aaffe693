// Convolution through oneDNN: forward, backward data and backward weights (with the bias
// gradient), 1 to 3 spatial dimensions, groups, strides, dilations and padding, in fp32 or
// bf16 (fp32 accumulation, each output rounded once). Buffers are plain NC(D)(H)W / O I/g
// (D)(H)W as ONNX stores them; oneDNN picks its own (blocked) layouts and the arguments are
// reordered around the call (dnnl_context.h).
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace ampc::kernels::cpu {

struct DnnlConv {
  // Forward: x, w, bias (kUndefined: none), y. Backward: the types of dx / dw, dy, db.
  DType x_type = DType::kFloat32, w_type = DType::kFloat32, y_type = DType::kFloat32;
  DType bias_type = DType::kUndefined;
  int spatial = 2;  // 1 to 3; the arrays below use their first `spatial` entries
  int64_t n = 0, c = 0, m = 0, group = 1;
  int64_t image[3] = {1, 1, 1};  // input spatial sizes
  int64_t cols[3] = {1, 1, 1};   // output spatial sizes
  int64_t kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1};
  int64_t dilation[3] = {1, 1, 1};
  int64_t pad[3] = {0, 0, 0};  // at the start; the end padding follows from the sizes
};

// Each returns false when oneDNN cannot serve the problem (then nothing was written).
bool dnnl_conv_forward(const DnnlConv& p, const void* x, const void* w, const void* bias, void* y);
bool dnnl_conv_backward_data(const DnnlConv& p, const void* dy, const void* w, void* dx);
// db may be null (then bias_type is ignored). Also false for a depthwise problem (group ==
// c) where oneDNN would run its per-channel GEMM path: depthwise_grad.h serves those.
bool dnnl_conv_backward_weights(const DnnlConv& p, const void* dy, const void* x, void* dw,
                                void* db);

}  // namespace ampc::kernels::cpu
