// What a backend derives from a step's typed parameters (plan.proto's RowwiseParams,
// ReduceParams, ...) and its input's dims at load or run time: the one definition of each op's
// geometry, so that the CPU ops and the CUDA builders cannot drift apart. The parameters come
// from the legalize stage (compiler/lower/legalize.h); no ONNX attribute is read here.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/plan/plan.pb.h"

namespace ampc::plan {

// x viewed as [outer, n, inner]: outer * inner rows of n values each.
struct RowShape {
  int64_t outer = 1, n = 1, inner = 1;
};
RowShape row_shape(const RowwiseParams& p, const std::vector<int64_t>& dims);

// `step`, checked to carry typed parameters of kind `expected`; throws ampc::Error naming the
// step when it has none (a step built without legalize: a bug, since plans of an older format
// are refused at load).
const Step& with_params(const Step& step, Step::ParamsCase expected);

// The typed parameters of `step`, checked.
inline const RowwiseParams& rowwise_params(const Step& s) {
  return with_params(s, Step::kRowwise).rowwise();
}
inline const ReduceParams& reduce_params(const Step& s) {
  return with_params(s, Step::kReduce).reduce();
}
inline const BatchNormParams& batch_norm_params(const Step& s) {
  return with_params(s, Step::kBatchNorm).batch_norm();
}
inline const CrossEntropyParams& cross_entropy_params(const Step& s) {
  return with_params(s, Step::kCrossEntropy).cross_entropy();
}
inline const WindowParams& window_params(const Step& s) {
  return with_params(s, Step::kWindow).window();
}
inline const ScaleUpdateParams& scale_update_params(const Step& s) {
  return with_params(s, Step::kScaleUpdate).scale_update();
}
inline const ClipParams& clip_params(const Step& s) {
  return with_params(s, Step::kClip).clip();
}

// A reduction's reduced axes as flags over x's `rank` axes (every axis when it names none), or
// nullopt when it reduces nothing (no axes under noop_with_empty_axes: the output is x).
// `axes_input`: input 1's values, for parameters with runtime_axes (normalised and checked
// here, throwing ampc::Error for an axis out of range).
std::optional<std::vector<bool>> reduced_axes(const ReduceParams& p, int64_t rank,
                                              const std::vector<int64_t>& axes_input = {});
// Its output's dims: x's dims without the reduced axes, or with 1 there under keep_dims.
std::vector<int64_t> reduced_dims(const ReduceParams& p, const std::vector<bool>& reduced,
                                  const std::vector<int64_t>& dims);

}  // namespace ampc::plan
