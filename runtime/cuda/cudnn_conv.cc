#include "runtime/cuda/cudnn_conv.h"

#include <algorithm>

#include "base/error.h"
#include "runtime/cuda/cuda_check.h"

namespace ampc::rt::cuda {
namespace {

// The most workspace an algorithm may ask for; the heuristics' first choice within it wins.
constexpr size_t kMaxWorkspace = size_t{1} << 30;

cudnnDataType_t cudnn_type(DType t, const std::string& label) {
  switch (t) {
    case DType::kFloat32:
      return CUDNN_DATA_FLOAT;
    case DType::kFloat16:
      return CUDNN_DATA_HALF;
    case DType::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      throw Error(label + ": element type " + std::string(dtype_name(t)) +
                  " is not supported by the CUDA backend's convolution (f16, bf16, f32 are)");
  }
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

// The heuristics' first successful algorithm within the cap, deterministic ones first.
template <typename Perf>
const Perf* choose(const Perf* perf, int n) {
  for (bool need_deterministic : {true, false}) {
    for (int i = 0; i < n; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxWorkspace) continue;
      if (need_deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
      return &perf[i];
    }
  }
  return nullptr;
}

}  // namespace

CudnnConv::CudnnConv(cudnnHandle_t handle, const ConvShape& s, bool forward, bool data_grad,
                     bool filter_grad, const std::string& label)
    : handle_(handle), label_(label) {
  const cudnnDataType_t type = cudnn_type(s.dtype, label);
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
  type_ = type;
  nd_ = nd;
  channels_ = y[1];
  check(cudnnCreateTensorDescriptor(&x_), label + ": cudnnCreateTensorDescriptor");
  check(cudnnCreateTensorDescriptor(&y_), label + ": cudnnCreateTensorDescriptor");
  check(cudnnCreateFilterDescriptor(&w_), label + ": cudnnCreateFilterDescriptor");
  check(cudnnCreateConvolutionDescriptor(&conv_), label + ": cudnnCreateConvolutionDescriptor");
  check(cudnnSetTensorNdDescriptor(x_, type, nd, x.data(), packed(x).data()), label + ": X");
  check(cudnnSetTensorNdDescriptor(y_, type, nd, y.data(), packed(y).data()), label + ": Y");
  check(cudnnSetFilterNdDescriptor(w_, type, CUDNN_TENSOR_NCHW, nd, w.data()), label + ": W");
  const std::vector<int> p = to_int(pads, label), st = to_int(strides, label),
                         d = to_int(dilations, label);
  check(cudnnSetConvolutionNdDescriptor(conv_, nd - 2, p.data(), st.data(), d.data(),
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        label + ": convolution descriptor");
  check(cudnnSetConvolutionGroupCount(conv_, static_cast<int>(s.group)), label + ": group");
  // fp32 stays fp32 (no TF32); 16-bit IO may use tensor cores (fp32 accumulation).
  check(cudnnSetConvolutionMathType(
            conv_, s.dtype == DType::kFloat32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH),
        label + ": math type");
  std::vector<int> out(static_cast<size_t>(nd));
  check(cudnnGetConvolutionNdForwardOutputDim(conv_, x_, w_, nd, out.data()),
        label + ": output shape");
  if (out != y) throw Error(label + ": cuDNN's output shape differs from the plan's");

  constexpr int kCount = 16;
  int n = 0;
  if (forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[kCount];
    check(cudnnGetConvolutionForwardAlgorithm_v7(handle, x_, w_, conv_, y_, kCount, &n, perf),
          label + ": forward heuristics");
    const auto* c = choose(perf, n);
    if (!c) throw Error(label + ": cuDNN has no forward algorithm for this convolution");
    fwd_algo_ = c->algo;
    workspace_ = std::max(workspace_, c->memory);
  }
  if (data_grad) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kCount];
    check(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w_, y_, conv_, x_, kCount, &n, perf),
          label + ": backward-data heuristics");
    const auto* c = choose(perf, n);
    if (!c) throw Error(label + ": cuDNN has no backward-data algorithm for this convolution");
    data_algo_ = c->algo;
    workspace_ = std::max(workspace_, c->memory);
  }
  if (filter_grad) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kCount];
    check(
        cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x_, y_, conv_, w_, kCount, &n, perf),
        label + ": backward-filter heuristics");
    const auto* c = choose(perf, n);
    if (!c) throw Error(label + ": cuDNN has no backward-filter algorithm for this convolution");
    filter_algo_ = c->algo;
    workspace_ = std::max(workspace_, c->memory);
  }
}

void CudnnConv::enable_bias() {
  if (b_) return;
  check(cudnnCreateTensorDescriptor(&b_), label_ + ": cudnnCreateTensorDescriptor");
  std::vector<int> dims(static_cast<size_t>(nd_), 1);
  dims[1] = channels_;
  check(cudnnSetTensorNdDescriptor(b_, type_, nd_, dims.data(), packed(dims).data()),
        label_ + ": B");
}

void CudnnConv::add_bias(const void* b, void* y, cudaStream_t stream) const {
  const float one = 1;
  check(cudnnSetStream(handle_, stream), label_ + ": cudnnSetStream");
  check(cudnnAddTensor(handle_, &one, b_, b, &one, y_, y), label_ + ": cudnnAddTensor");
}

CudnnConv::~CudnnConv() {
  if (b_) cudnnDestroyTensorDescriptor(b_);
  if (x_) cudnnDestroyTensorDescriptor(x_);
  if (y_) cudnnDestroyTensorDescriptor(y_);
  if (w_) cudnnDestroyFilterDescriptor(w_);
  if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
}

void CudnnConv::forward(const void* x, const void* w, void* y, void* workspace,
                        cudaStream_t stream) const {
  const float one = 1, zero = 0;
  check(cudnnSetStream(handle_, stream), label_ + ": cudnnSetStream");
  check(cudnnConvolutionForward(handle_, &one, x_, x, w_, w, conv_, fwd_algo_, workspace,
                                workspace_, &zero, y_, y),
        label_ + ": cudnnConvolutionForward");
}

void CudnnConv::data_grad(const void* dy, const void* w, void* dx, void* workspace,
                          cudaStream_t stream) const {
  const float one = 1, zero = 0;
  check(cudnnSetStream(handle_, stream), label_ + ": cudnnSetStream");
  check(cudnnConvolutionBackwardData(handle_, &one, w_, w, y_, dy, conv_, data_algo_, workspace,
                                     workspace_, &zero, x_, dx),
        label_ + ": cudnnConvolutionBackwardData");
}

void CudnnConv::filter_grad(const void* dy, const void* x, void* dw, void* workspace,
                            cudaStream_t stream) const {
  const float one = 1, zero = 0;
  check(cudnnSetStream(handle_, stream), label_ + ": cudnnSetStream");
  check(cudnnConvolutionBackwardFilter(handle_, &one, x_, x, y_, dy, conv_, filter_algo_, workspace,
                                       workspace_, &zero, w_, dw),
        label_ + ": cudnnConvolutionBackwardFilter");
}

}  // namespace ampc::rt::cuda
