#include "passes/comm_schemas.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include "passes/autodiff/ampc_schemas.h"

namespace ampc::passes {
namespace {

using onnx::AttributeProto;
using onnx::OpSchema;

const std::vector<std::string> kFloatTypes = {"tensor(float16)", "tensor(bfloat16)",
                                              "tensor(float)", "tensor(double)"};

// Output i: input i's shape, element type from the attribute `to`.
void shape_like_inputs(onnx::InferenceContext& ctx) {
  const auto* to = ctx.getAttribute("to");
  for (size_t i = 0; i < ctx.getNumOutputs() && i < ctx.getNumInputs(); ++i) {
    if (to) onnx::updateOutputElemType(ctx, i, static_cast<int32_t>(to->i()));
    if (onnx::hasInputShape(ctx, i)) onnx::propagateShapeFromInputToOutput(ctx, i, i);
  }
}

OpSchema comm_op(const char* name, const char* doc, const char* in, const char* out) {
  OpSchema s;
  s.SetName(name)
      .SetDomain(autodiff::kAmpcDomain)
      .SinceVersion(autodiff::kAmpcDomainVersion)
      .SetDoc(doc)
      .Attr("bucket", "The gradient bucket (pairs a start with its wait).", AttributeProto::INT)
      .Attr("to", "Element type of the outputs (TensorProto.DataType).", AttributeProto::INT)
      .TypeConstraint("A", kFloatTypes, "Inputs.")
      .TypeConstraint("B", kFloatTypes, "Outputs.")
      .Input(0, in, "One tensor per gradient of the bucket.", "A", OpSchema::Variadic, false)
      .Output(0, out, "One tensor per input.", "B", OpSchema::Variadic, false)
      .TypeAndShapeInferenceFunction(shape_like_inputs);
  return s;
}

}  // namespace

void register_comm_schemas() {
  static const bool once = [] {
    autodiff::register_ampc_schemas();
    onnx::RegisterSchema(comm_op("AllReduceStart",
                                 "Divides each gradient by the world size, casts it to `to` and "
                                 "starts its sum over the ranks (non-blocking).",
                                 "gradients", "in_flight"));
    onnx::RegisterSchema(comm_op("AllReduceWait",
                                 "Waits for the bucket's sums and casts them to `to`.", "in_flight",
                                 "reduced"));
    return true;
  }();
  (void)once;
}

}  // namespace ampc::passes
