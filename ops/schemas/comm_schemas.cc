#include "ops/schemas/comm_schemas.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include "ops/schemas/ampc_schema_parts.h"
#include "ops/schemas/ampc_schemas.h"

namespace ampc::ops {
namespace {

using onnx::AttributeProto;
using onnx::OpSchema;

// Output i: input i's shape, element type from the attribute `to`.
void shape_like_inputs(onnx::InferenceContext& ctx) {
  const auto* to = ctx.getAttribute("to");
  for (size_t i = 0; i < ctx.getNumOutputs() && i < ctx.getNumInputs(); ++i) {
    if (to) onnx::updateOutputElemType(ctx, i, static_cast<int32_t>(to->i()));
    if (onnx::hasInputShape(ctx, i)) onnx::propagateShapeFromInputToOutput(ctx, i, i);
  }
}

OpSchema comm_op(const char* name, const char* doc, const char* in, const char* out) {
  OpSchema s = ampc_op_schema(name, doc);
  s.Attr("bucket", "The gradient bucket (pairs a start with its wait).", AttributeProto::INT)
      .Attr("to", "Element type of the outputs (TensorProto.DataType).", AttributeProto::INT)
      .TypeConstraint("A", float_type_strs(), "Inputs.")
      .TypeConstraint("B", float_type_strs(), "Outputs.")
      .Input(0, in, "One tensor per gradient of the bucket.", "A", OpSchema::Variadic, false)
      .Output(0, out, "One tensor per input.", "B", OpSchema::Variadic, false)
      .TypeAndShapeInferenceFunction(shape_like_inputs);
  return s;
}

// AllReduceSum: the input's type and shape.
OpSchema all_reduce_sum() {
  OpSchema s = ampc_op_schema("AllReduceSum",
                              "The sum of X over every rank, blocking (a copy on one rank).");
  s.TypeConstraint("T", float_type_strs(), "Any float.")
      .Input(0, "X", "This rank's tensor.", "T")
      .Output(0, "Y", "The sum over the ranks.", "T")
      .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
  return s;
}

// BatchStatistics: outputs 0, 1 have the type and shape of inputs 2, 3.
OpSchema batch_statistics() {
  OpSchema s = ampc_op_schema(
      "BatchStatistics",
      "The statistics a synchronised BatchNormalization normalises with: in training the "
      "batch's (inputs 2, 3); evaluation replaces the node by the running ones (0, 1).");
  s.TypeConstraint("T", float_type_strs(), "Any float.")
      .Input(0, "running_mean", "Running mean.", "T")
      .Input(1, "running_var", "Running variance.", "T")
      .Input(2, "batch_mean", "The batch's mean over every rank.", "T")
      .Input(3, "batch_var", "The batch's (biased) variance over every rank.", "T")
      .Output(0, "mean", "batch_mean.", "T")
      .Output(1, "var", "batch_var.", "T")
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        for (size_t i = 0; i < 2; ++i) output_like_input(ctx, i + 2, i);
      });
  return s;
}

}  // namespace

void register_comm_schemas() {
  static const bool once = [] {
    register_ampc_schemas();
    onnx::RegisterSchema(comm_op("AllReduceStart",
                                 "Divides each gradient by the world size, casts it to `to` and "
                                 "starts its sum over the ranks (non-blocking).",
                                 "gradients", "in_flight"));
    onnx::RegisterSchema(comm_op("AllReduceWait",
                                 "Waits for the bucket's sums and casts them to `to`.", "in_flight",
                                 "reduced"));
    onnx::RegisterSchema(all_reduce_sum());
    onnx::RegisterSchema(batch_statistics());
    return true;
  }();
  (void)once;
}

}  // namespace ampc::ops
