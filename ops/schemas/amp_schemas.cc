#include "ops/schemas/amp_schemas.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include "ops/schemas/ampc_schema_parts.h"
#include "ops/schemas/ampc_schemas.h"
#include "ops/schemas/comm_schemas.h"

namespace ampc::ops {
namespace {

using onnx::AttributeProto;
using onnx::OpSchema;

// Output `out` is a scalar of element type `type`.
void scalar(onnx::InferenceContext& ctx, size_t out, int32_t type) {
  onnx::updateOutputElemType(ctx, out, type);
  onnx::getOutputShape(ctx, out);  // rank 0: a shape with no dims
}

OpSchema unscale_check() {
  OpSchema s =
      ampc_op_schema("UnscaleCheck",
                     "Multiplies every gradient by inv_scale and reports whether any element of "
                     "any gradient is not finite.");
  s.TypeConstraint("G", float_type_strs(), "Gradient tensors.")
      .Input(0, "inv_scale", "1 / loss scale (fp32 scalar).", "tensor(float)")
      .Input(1, "gradients", "Scaled gradients.", "G", OpSchema::Variadic, false)
      .Output(0, "found_inf", "True when a gradient holds inf or NaN.", "tensor(bool)")
      .Output(1, "unscaled", "The gradients times inv_scale.", "G", OpSchema::Variadic, false)
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        scalar(ctx, 0, onnx::TensorProto::BOOL);
        for (size_t i = 1; i < ctx.getNumOutputs() && i < ctx.getNumInputs(); ++i)
          output_like_input(ctx, i, i);
      });
  return s;
}

OpSchema update_scale() {
  OpSchema s = ampc_op_schema("UpdateScale",
                              "torch's _amp_update_scale_: backs off on found_inf, grows after "
                              "growth_interval steps without one; optional bounds.");
  s.Attr("growth_factor", "Factor after growth_interval clean steps.", AttributeProto::FLOAT, 2.0f)
      .Attr("backoff_factor", "Factor after a step with non-finite gradients.",
            AttributeProto::FLOAT, 0.5f)
      .Attr("growth_interval", "Clean steps before growth.", AttributeProto::INT,
            static_cast<int64_t>(2000))
      .Attr("min_scale", "Lower bound of the scale (none when absent).", AttributeProto::FLOAT,
            onnx::OPTIONAL_VALUE)
      .Attr("max_scale", "Upper bound of the scale (none when absent).", AttributeProto::FLOAT,
            onnx::OPTIONAL_VALUE)
      .Input(0, "scale", "Current loss scale.", "tensor(float)")
      .Input(1, "growth_tracker", "Clean steps since the last change.", "tensor(int32)")
      .Input(2, "found_inf", "Whether this step's gradients were not finite.", "tensor(bool)")
      .Output(0, "new_scale", "Next loss scale.", "tensor(float)")
      .Output(1, "new_growth_tracker", "Next growth tracker.", "tensor(int32)")
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        output_like_input(ctx, 0, 0);
        output_like_input(ctx, 1, 1);
      });
  return s;
}

OpSchema clip_grad_norm() {
  OpSchema s =
      ampc_op_schema("ClipGradNorm",
                     "Global L2 norm of all gradients; with max_norm, the gradients scaled by "
                     "min(max_norm / (norm + 1e-6), 1).");
  s.Attr("max_norm", "Clip threshold; absent: compute the norm only.", AttributeProto::FLOAT,
         onnx::OPTIONAL_VALUE)
      .TypeConstraint("G", float_type_strs(), "Gradient tensors.")
      .Input(0, "gradients", "Gradients.", "G", OpSchema::Variadic, false)
      .Output(0, "total_norm", "Global L2 norm (fp32 scalar).", "tensor(float)")
      .Output(1, "clipped", "Clipped gradients (none without max_norm).", "G", OpSchema::Variadic,
              false, 0)
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        scalar(ctx, 0, onnx::TensorProto::FLOAT);
        for (size_t i = 1; i < ctx.getNumOutputs() && i <= ctx.getNumInputs(); ++i)
          output_like_input(ctx, i - 1, i);
      });
  return s;
}

}  // namespace

void register_amp_schemas() {
  static const bool once = [] {
    register_ampc_schemas();  // the domain's version range
    onnx::RegisterSchema(unscale_check());
    onnx::RegisterSchema(update_scale());
    onnx::RegisterSchema(clip_grad_norm());
    register_comm_schemas();  // data-parallel communication (passes/data_parallel.h)
    return true;
  }();
  (void)once;
}

}  // namespace ampc::ops
