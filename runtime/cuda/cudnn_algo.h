// Which of cuDNN's heuristic answers a convolution pass uses (cudnn_conv.h), host logic on the
// perf structs only, so that tests check it without a device.
#pragma once

#include <cudnn.h>

#include <cstddef>

namespace ampc::rt::cuda {

// The most workspace an algorithm may ask for; the heuristics' first choice within it wins.
constexpr size_t kMaxConvWorkspace = size_t{1} << 30;

// Whether an answer computed with `math` may be used: fp32 convolutions stay fp32 (FMA math:
// no TF32 tensor cores, which CUDNN_DEFAULT_MATH permits on Ampere and later, nor the
// down-conversion of ALLOW_CONVERSION); 16-bit ones may use tensor cores (fp32 accumulation).
inline bool math_allowed(cudnnMathType_t math, bool fp32) {
  if (fp32) return math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH;
  return math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// The math type a pass's own convolution descriptor gets for the chosen answer: the answer's
// own (cuDNN runs an algorithm with the descriptor's math type, not the heuristic's), but FMA
// for fp32 whatever the answer says, so that DEFAULT cannot turn into TF32.
inline cudnnMathType_t math_for_pass(cudnnMathType_t chosen, bool fp32) {
  return fp32 ? CUDNN_FMA_MATH : chosen;
}

// The heuristics' first successful algorithm within the cap whose math type is allowed,
// deterministic ones first; null when there is none. Perf: cudnnConvolution*AlgoPerf_t.
template <typename Perf>
const Perf* choose_algo(const Perf* perf, int n, bool fp32) {
  for (bool need_deterministic : {true, false}) {
    for (int i = 0; i < n; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxConvWorkspace) continue;
      if (!math_allowed(perf[i].mathType, fp32)) continue;
      if (need_deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
      return &perf[i];
    }
  }
  return nullptr;
}

}  // namespace ampc::rt::cuda
