#include "runtime/cuda/cudnn_conv.h"

#include <algorithm>

#include "base/error.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cudnn_algo.h"
#include "runtime/dtype_codes.h"

namespace ampc::rt::cuda {
namespace {

cudnnDataType_t cudnn_type(DType t, const std::string& label) {
  static constexpr DTypeCode<cudnnDataType_t> kCodes[] = {{DType::kFloat32, CUDNN_DATA_FLOAT},
                                                          {DType::kFloat16, CUDNN_DATA_HALF},
                                                          {DType::kBFloat16, CUDNN_DATA_BFLOAT16}};
  return library_dtype_code(kCodes, t, label, "the CUDA backend's convolution", "f16, bf16, f32");
}

std::vector<int> to_int(const std::vector<int64_t>& v, const std::string& label) {
  std::vector<int> out;
  for (int64_t x : v) {
    if (x > INT32_MAX || x < INT32_MIN) throw Error(label + ": a dimension exceeds cuDNN's range");
    out.push_back(static_cast<int>(x));
  }
  return out;
}

// Packed strides of a row-major tensor.
std::vector<int> packed(const std::vector<int>& dims) {
  std::vector<int> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

constexpr int kCount = 16;  // heuristic answers asked for

// One pass's algorithm: find(&n, perf) asks the heuristics for kCount answers, choose_algo picks
// one, the pass's convolution descriptor `conv` gets its math type, and size(algo) queries the
// workspace. `pass` ("forward", ...) names the pass in errors.
template <typename Perf, typename Find, typename Size>
auto pick_algo(cudnnConvolutionDescriptor_t conv, bool fp32, const std::string& label,
               const std::string& pass, Find find, Size size) {
  Perf perf[kCount];
  int n = 0;
  check(find(&n, perf), label + ": " + pass + " heuristics");
  const Perf* c = choose_algo(perf, n, fp32);
  if (!c) throw Error(label + ": cuDNN has no " + pass + " algorithm for this convolution");
  check(cudnnSetConvolutionMathType(conv, math_for_pass(c->mathType, fp32)),
        label + ": " + pass + " math type");
  check(size(c->algo), label + ": " + pass + " workspace size");
  return c->algo;
}

}  // namespace

CudnnConv::CudnnConv(cudnnHandle_t handle, const ConvShape& s, bool forward, bool data_grad,
                     bool filter_grad, const std::string& label)
    : handle_(handle), label_(label), shape_(s) {
  if (!handle) throw Error(label + ": internal: no cuDNN handle (the plan has no convolution?)");
  const cudnnDataType_t type = cudnn_type(s.dtype, label);
  const bool fp32 = s.dtype == DType::kFloat32;
  // cuDNN wants at least two spatial dimensions: 1-D is 2-D with a leading 1.
  auto widen = [](std::vector<int64_t> v) {
    if (v.size() == 3) v.insert(v.begin() + 2, 1);
    return v;
  };
  std::vector<int64_t> pads = s.pads, strides = s.strides, dilations = s.dilations;
  if (pads.size() == 1) {
    pads.insert(pads.begin(), 0);
    strides.insert(strides.begin(), 1);
    dilations.insert(dilations.begin(), 1);
  }
  const std::vector<int> x = to_int(widen(s.x), label), w = to_int(widen(s.w), label),
                         y = to_int(widen(s.y), label);
  const int nd = static_cast<int>(x.size());
  pads_ = to_int(pads, label);
  strides_ = to_int(strides, label);
  dilations_ = to_int(dilations, label);
  // The heuristics are asked under the precision's math: FMA for fp32, tensor cores allowed
  // for 16-bit IO (fp32 accumulation).
  search_math_ = fp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
  check(cudnnCreateTensorDescriptor(&x_), label + ": cudnnCreateTensorDescriptor");
  check(cudnnCreateTensorDescriptor(&y_), label + ": cudnnCreateTensorDescriptor");
  check(cudnnCreateFilterDescriptor(&w_), label + ": cudnnCreateFilterDescriptor");
  check(cudnnSetTensorNdDescriptor(x_, type, nd, x.data(), packed(x).data()), label + ": X");
  check(cudnnSetTensorNdDescriptor(y_, type, nd, y.data(), packed(y).data()), label + ": Y");
  check(cudnnSetFilterNdDescriptor(w_, type, CUDNN_TENSOR_NCHW, nd, w.data()), label + ": W");
  {
    cudnnConvolutionDescriptor_t probe = make_conv();
    std::vector<int> out(static_cast<size_t>(nd));
    const cudnnStatus_t st = cudnnGetConvolutionNdForwardOutputDim(probe, x_, w_, nd, out.data());
    cudnnDestroyConvolutionDescriptor(probe);
    check(st, label + ": output shape");
    if (out != y) throw Error(label + ": cuDNN's output shape differs from the plan's");
  }

  // Each pass: the heuristics' answers for its descriptors, then its workspace for the choice.
  if (forward) {
    fwd_ = make_conv();
    fwd_algo_ = pick_algo<cudnnConvolutionFwdAlgoPerf_t>(
        fwd_, fp32, label, "forward",
        [&](int* n, auto* perf) {
          return cudnnGetConvolutionForwardAlgorithm_v7(handle, x_, w_, fwd_, y_, kCount, n, perf);
        },
        [&](auto algo) {
          return cudnnGetConvolutionForwardWorkspaceSize(handle, x_, w_, fwd_, y_, algo, &fwd_ws_);
        });
  }
  if (data_grad) {
    data_ = make_conv();
    data_algo_ = pick_algo<cudnnConvolutionBwdDataAlgoPerf_t>(
        data_, fp32, label, "backward-data",
        [&](int* n, auto* perf) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w_, y_, data_, x_, kCount, n,
                                                             perf);
        },
        [&](auto algo) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w_, y_, data_, x_, algo,
                                                              &data_ws_);
        });
  }
  if (filter_grad) {
    filter_ = make_conv();
    filter_algo_ = pick_algo<cudnnConvolutionBwdFilterAlgoPerf_t>(
        filter_, fp32, label, "backward-filter",
        [&](int* n, auto* perf) {
          return cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x_, y_, filter_, w_, kCount,
                                                               n, perf);
        },
        [&](auto algo) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, x_, y_, filter_, w_, algo,
                                                                &filter_ws_);
        });
  }
  workspace_ = std::max({fwd_ws_, data_ws_, filter_ws_});
}

cudnnConvolutionDescriptor_t CudnnConv::make_conv() {
  cudnnConvolutionDescriptor_t conv = nullptr;
  check(cudnnCreateConvolutionDescriptor(&conv), label_ + ": cudnnCreateConvolutionDescriptor");
  try {
    check(cudnnSetConvolutionNdDescriptor(conv, static_cast<int>(pads_.size()), pads_.data(),
                                          strides_.data(), dilations_.data(),
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          label_ + ": convolution descriptor");
    check(cudnnSetConvolutionGroupCount(conv, static_cast<int>(shape_.group)), label_ + ": group");
    check(cudnnSetConvolutionMathType(conv, search_math_), label_ + ": math type");
  } catch (...) {
    cudnnDestroyConvolutionDescriptor(conv);
    throw;
  }
  return conv;
}

CudnnConv::~CudnnConv() {
  if (x_) cudnnDestroyTensorDescriptor(x_);
  if (y_) cudnnDestroyTensorDescriptor(y_);
  if (w_) cudnnDestroyFilterDescriptor(w_);
  for (cudnnConvolutionDescriptor_t c : {fwd_, data_, filter_}) {
    if (c) cudnnDestroyConvolutionDescriptor(c);
  }
}

void CudnnConv::forward(const void* x, const void* w, void* y, void* workspace,
                        cudaStream_t stream) const {
  const float one = 1, zero = 0;
  check(cudnnSetStream(handle_, stream), label_ + ": cudnnSetStream");
  check(cudnnConvolutionForward(handle_, &one, x_, x, w_, w, fwd_, fwd_algo_, workspace, fwd_ws_,
                                &zero, y_, y),
        label_ + ": cudnnConvolutionForward");
}

void CudnnConv::data_grad(const void* dy, const void* w, void* dx, void* workspace,
                          cudaStream_t stream) const {
  const float one = 1, zero = 0;
  check(cudnnSetStream(handle_, stream), label_ + ": cudnnSetStream");
  check(cudnnConvolutionBackwardData(handle_, &one, w_, w, y_, dy, data_, data_algo_, workspace,
                                     data_ws_, &zero, x_, dx),
        label_ + ": cudnnConvolutionBackwardData");
}

void CudnnConv::filter_grad(const void* dy, const void* x, void* dw, void* workspace,
                            cudaStream_t stream) const {
  const float one = 1, zero = 0;
  check(cudnnSetStream(handle_, stream), label_ + ": cudnnSetStream");
  check(cudnnConvolutionBackwardFilter(handle_, &one, x_, x, y_, dy, filter_, filter_algo_,
                                       workspace, filter_ws_, &zero, w_, dw),
        label_ + ": cudnnConvolutionBackwardFilter");
}

}  // namespace ampc::rt::cuda
