// Argument types and limits of the launch API that the CUDA kernels (kernels/cuda/*.h) and
// their CPU twins (kernels/twin/*.h) share: each is defined once here and brought into
// ampc::kernels::cuda and ampc::kernels::twin with using-declarations, so a value built for
// one side passes to the other unchanged. Plain C++ (no CUDA headers), compiled by g++ and nvcc.
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace ampc::kernels::shared {

// copy.h: dimensions a strided copy handles after merging dimensions that are contiguous in
// both source and destination (and dropping size-1 ones).
constexpr int kMaxCopyDims = 8;

// elementwise.h: dimensions of a broadcast elementwise op after merging.
constexpr int kMaxElementwiseDims = 8;

// elementwise.h: binary's op.
enum class BinaryOp : int32_t {
  kAdd = 0,  // integers wrap around (two's complement), as the CPU op
  kSub = 1,
  kMul = 2,
  kDiv = 3,    // truncates towards zero; x / 0 = 0; INT_MIN / -1 wraps
  kEqual = 4,  // comparisons write bool
  kLess = 5,
  kGreater = 6,
  kLessOrEqual = 7,
  kGreaterOrEqual = 8,
  kAnd = 9,  // bool only
  kOr = 10,
  kXor = 11,
};

// pad.h: dimensions of a Pad.
constexpr int kMaxPadDims = 8;

// pad.h: Pad's mode attribute.
enum class PadMode : int32_t { kConstant = 0, kEdge = 1, kReflect = 2 };

// pool.h: the window geometry, kernels::cpu::ConvGeom's base (pad: at the start of each
// dimension; pad_end: at the end, for pooling divisors only):
//   image index = column index * stride - pad + kernel index * dilation.
struct PoolGeometry {
  int64_t image[3] = {1, 1, 1};
  int64_t cols[3] = {1, 1, 1};
  int64_t kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1};
  int64_t dilation[3] = {1, 1, 1};
  int64_t pad[3] = {0, 0, 0};
  int64_t pad_end[3] = {0, 0, 0};
};

// gather_scatter.h: ScatterND's reduction attribute.
enum class ScatterReduction : int32_t { kNone = 0, kAdd = 1, kMul = 2, kMax = 3, kMin = 4 };

// reduce.h: which Reduce* op (also reduce_math.h's ReduceKind).
enum class ReduceOp : int32_t {
  kSum = 0,
  kMean = 1,
  kProd = 2,
  kMax = 3,  // propagates NaN
  kMin = 4,  // propagates NaN
  kL1 = 5,
  kL2 = 6,
  kLogSum = 7,
  kSumSquare = 8,
};

// cross_entropy.h: SoftmaxCrossEntropyLoss's reduction attribute.
enum class CeReduction : int32_t { kNone = 0, kSum = 1, kMean = 2 };

// Whether an operand of type `narrow` may be read widened, exactly, where the op computes in
// `wide`: 16-bit floats into f32, nothing else (the ops whose widening Cast was folded in:
// ampc.SoftmaxCrossEntropyLoss, and the dY of ampc.SoftmaxGrad and LayerNormalizationGrad).
inline bool reads_widened(DType narrow, DType wide) {
  return (narrow == DType::kFloat16 || narrow == DType::kBFloat16) && wide == DType::kFloat32;
}

// cross_entropy.h: the loss's and log-probabilities' type for scores of type `scores`, given as
// `out` (kUndefined: the scores' own); kUndefined where none fits: only 16-bit scores are read
// widened, and only to f32 (ampc.SoftmaxCrossEntropyLoss).
inline DType ce_output_type(DType scores, DType out) {
  if (out == DType::kUndefined || out == scores) return scores;
  return reads_widened(scores, out) ? out : DType::kUndefined;
}

// softmax.h and layernorm.h: whether a gradient dY of type `dy` fits the op whose other float
// operands (Y, X) are of type `y`: the same type, or 16-bit read widened into f32.
inline bool grad_input_fits(DType dy, DType y) {
  return dy == y || reads_widened(dy, y);
}

}  // namespace ampc::kernels::shared
