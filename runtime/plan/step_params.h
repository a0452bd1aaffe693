// What a backend derives from a step's typed parameters (plan.proto's RowwiseParams,
// ReduceParams, ...) and its input's dims at load or run time: the one definition of each op's
// geometry, so that the CPU ops and the CUDA builders cannot drift apart. The parameters come
// from the legalize stage (lower/legalize.h); no ONNX attribute is read here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::plan {

// x viewed as [outer, n, inner]: outer * inner rows of n values each.
struct RowShape {
  int64_t outer = 1, n = 1, inner = 1;
};
RowShape row_shape(const RowwiseParams& p, const std::vector<int64_t>& dims);

// The field of Step.params that holds a message of `type`.
const google::protobuf::FieldDescriptor* params_field(const google::protobuf::Descriptor* type);
// Throws ampc::Error naming `step`: it has no typed parameters of the kind asked for.
[[noreturn]] void missing_params(const Step& step);

// The typed parameters P of `step` (params<RowwiseParams>(step), ...); throws ampc::Error
// naming the step when it carries none of that kind (a step built without legalize: a bug,
// since plans of an older format are refused at load).
template <typename P>
const P& params(const Step& step) {
  static const google::protobuf::FieldDescriptor* const field = params_field(P::descriptor());
  const google::protobuf::Reflection* r = step.GetReflection();
  if (!r->HasField(step, field)) missing_params(step);
  return static_cast<const P&>(r->GetMessage(step, field));
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

// ConstantOfShape's element type: the FillParams' dtype when its value holds one element of a
// known numeric type, else nullopt (a malformed plan).
std::optional<DType> fill_dtype(const FillParams& p);

// A GEMM step's folded epilogue by name ("BIAS", "RELU_BIAS", ..., "#N" for a value this build
// does not know); empty for none and for steps that are not GEMMs (reports and messages).
std::string gemm_epilogue_name(const Step& step);

}  // namespace ampc::plan
