#include "ops/schemas/ampc_schemas.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <string>

#include "ops/ampc_forms.h"
#include "ops/schemas/ampc_schema_parts.h"

namespace ampc::ops {

const std::vector<std::string>& float_type_strs() {
  static const std::vector<std::string> kTypes = {"tensor(float16)", "tensor(bfloat16)",
                                                  "tensor(float)", "tensor(double)"};
  return kTypes;
}

onnx::OpSchema ampc_op_schema(const char* name, const char* doc) {
  onnx::OpSchema s;
  s.SetName(name).SetDomain(kAmpcDomain).SinceVersion(kAmpcDomainVersion).SetDoc(doc);
  return s;
}

void output_like_input(onnx::InferenceContext& ctx, size_t in, size_t out) {
  if (ctx.getNumOutputs() <= out || !ctx.getOutputType(out)) return;
  onnx::propagateElemTypeFromInputToOutput(ctx, in, out);
  if (onnx::hasInputShape(ctx, in)) onnx::propagateShapeFromInputToOutput(ctx, in, out);
}

namespace {

using onnx::AttributeProto;
using onnx::OpSchema;

// An op with the window attributes of a Conv or a pooling (kernel_shape, strides, pads, ...).
OpSchema base(const char* name, const char* doc) {
  OpSchema s = ampc_op_schema(name, doc);
  s.TypeConstraint("T", float_type_strs(), "Float tensors.")
      .Attr("kernel_shape", "Window shape.", AttributeProto::INTS, onnx::OPTIONAL_VALUE)
      .Attr("strides", "Window strides.", AttributeProto::INTS, onnx::OPTIONAL_VALUE)
      .Attr("pads", "Explicit pads (begin..., end...).", AttributeProto::INTS, onnx::OPTIONAL_VALUE)
      .Attr("dilations", "Window dilations.", AttributeProto::INTS, onnx::OPTIONAL_VALUE)
      .Attr("auto_pad", "As the forward op's.", AttributeProto::STRING, std::string("NOTSET"));
  return s;
}

OpSchema conv_grad() {
  OpSchema s = base("ConvGrad", "Gradients of Conv(X, W, B) given dY.");
  s.Attr("group", "As the Conv's.", AttributeProto::INT, static_cast<int64_t>(1))
      .Input(0, "dY", "Gradient of the Conv's output.", "T")
      .Input(1, "X", "The Conv's input.", "T")
      .Input(2, "W", "The Conv's weights.", "T")
      .Output(0, "dX", "Gradient of X.", "T", OpSchema::Optional)
      .Output(1, "dW", "Gradient of W.", "T", OpSchema::Optional)
      .Output(2, "dB", "Gradient of the bias.", "T", OpSchema::Optional)
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        output_like_input(ctx, 1, 0);
        output_like_input(ctx, 2, 1);
        if (ctx.getNumOutputs() < 3 || !ctx.getOutputType(2)) return;
        onnx::propagateElemTypeFromInputToOutput(ctx, 2, 2);
        if (!onnx::hasInputShape(ctx, 2)) return;
        const auto& w = ctx.getInputType(2)->tensor_type().shape();
        if (w.dim_size() < 1) return;
        *onnx::getOutputShape(ctx, 2)->add_dim() = w.dim(0);
      });
  return s;
}

// ONNX's Conv has no bfloat16 in the opsets libonnx 1.12 knows (up to 17); autocast uses
// this op, the same Conv with bfloat16 allowed, for convolutions of bf16 plans.
OpSchema conv() {
  OpSchema s = base("Conv", "ONNX's Conv (opset 11 semantics), with bfloat16 allowed.");
  s.Attr("group", "As ONNX Conv's.", AttributeProto::INT, static_cast<int64_t>(1))
      .Input(0, "X", "Input.", "T")
      .Input(1, "W", "Weights.", "T")
      .Input(2, "B", "Bias.", "T", OpSchema::Optional)
      .Output(0, "Y", "Output.", "T")
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        onnx::OpSchemaRegistry::Schema("Conv", 11)->GetTypeAndShapeInferenceFunction()(ctx);
      });
  return s;
}

// Nor has its ConvTranspose: this is the same op with bfloat16 allowed, for the transposed
// convolutions of bf16 plans (torch's conv_transpose2d is on autocast's lower-precision list).
OpSchema conv_transpose() {
  OpSchema s =
      base("ConvTranspose", "ONNX's ConvTranspose (opset 11 semantics), with bfloat16 allowed.");
  s.Attr("group", "As ONNX ConvTranspose's.", AttributeProto::INT, static_cast<int64_t>(1))
      .Attr("output_padding", "As ONNX ConvTranspose's.", AttributeProto::INTS,
            onnx::OPTIONAL_VALUE)
      .Attr("output_shape", "As ONNX ConvTranspose's.", AttributeProto::INTS, onnx::OPTIONAL_VALUE)
      .Input(0, "X", "Input.", "T")
      .Input(1, "W", "Weights.", "T")
      .Input(2, "B", "Bias.", "T", OpSchema::Optional)
      .Output(0, "Y", "Output.", "T")
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        onnx::OpSchemaRegistry::Schema("ConvTranspose", 11)
            ->GetTypeAndShapeInferenceFunction()(ctx);
      });
  return s;
}

// Nor has its MaxPool (bfloat16 came with opset 22): autocast uses this op, the same MaxPool
// with bfloat16 allowed, where a bf16 plan's MaxPool follows its bf16 input, as torch's
// max_pool2d does under autocast.
OpSchema max_pool() {
  OpSchema s = base("MaxPool", "ONNX's MaxPool (opset 12 semantics), with bfloat16 allowed.");
  s.Attr("ceil_mode", "As ONNX MaxPool's.", AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("storage_order", "As ONNX MaxPool's.", AttributeProto::INT, static_cast<int64_t>(0))
      .TypeConstraint("I", {"tensor(int64)"}, "Indices.")
      .Input(0, "X", "Input.", "T")
      .Output(0, "Y", "Output.", "T")
      .Output(1, "Indices", "Flat indices of the maxima.", "I", OpSchema::Optional)
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        onnx::OpSchemaRegistry::Schema("MaxPool", 12)->GetTypeAndShapeInferenceFunction()(ctx);
      });
  return s;
}

// Nor have AveragePool and GlobalAveragePool: their bf16 forms, for the same reason (torch's
// avg_pool2d and adaptive_avg_pool2d run in bf16 under autocast).
OpSchema average_pool() {
  OpSchema s =
      base("AveragePool", "ONNX's AveragePool (opset 11 semantics), with bfloat16 allowed.");
  s.Attr("ceil_mode", "As ONNX AveragePool's.", AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("count_include_pad", "As ONNX AveragePool's.", AttributeProto::INT,
            static_cast<int64_t>(0))
      .Input(0, "X", "Input.", "T")
      .Output(0, "Y", "Output.", "T")
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        onnx::OpSchemaRegistry::Schema("AveragePool", 11)->GetTypeAndShapeInferenceFunction()(ctx);
      });
  return s;
}

OpSchema global_average_pool() {
  OpSchema s = ampc_op_schema(
      "GlobalAveragePool", "ONNX's GlobalAveragePool (opset 1 semantics), with bfloat16 allowed.");
  s.TypeConstraint("T", float_type_strs(), "Float tensors.")
      .Input(0, "X", "Input.", "T")
      .Output(0, "Y", "Output.", "T")
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        onnx::OpSchemaRegistry::Schema("GlobalAveragePool", 1)
            ->GetTypeAndShapeInferenceFunction()(ctx);
      });
  return s;
}

// An activation's ampc form (ops/ampc_forms.h): ONNX's opset-17 schema of the op (its
// attributes with their defaults, one input X, one output Y of X's type) with every float
// type allowed.
OpSchema activation_form(std::string_view op) {
  const OpSchema* onnx_schema = onnx::OpSchemaRegistry::Schema(std::string(op), 17);
  const std::string doc = "ONNX's " + std::string(op) + " (opset " +
                          std::to_string(onnx_schema->SinceVersion()) +
                          " semantics), with every float type allowed.";
  OpSchema s = ampc_op_schema(std::string(op).c_str(), doc.c_str());
  for (const auto& [name, attribute] : onnx_schema->attributes()) s.Attr(attribute);
  s.TypeConstraint("T", float_type_strs(), "Float tensors.")
      .Input(0, "X", "Input.", "T")
      .Output(0, "Y", "Output.", "T")
      .TypeAndShapeInferenceFunction(
          [](onnx::InferenceContext& ctx) { output_like_input(ctx, 0, 0); });
  return s;
}

OpSchema pool_grad(const char* name, const char* doc) {
  OpSchema s = base(name, doc);
  s.Attr("ceil_mode", "As the forward op's.", AttributeProto::INT, static_cast<int64_t>(0))
      .Input(0, "dY", "Gradient of the pooling output.", "T")
      .Input(1, "X", "The pooling input.", "T")
      .Output(0, "dX", "Gradient of X.", "T")
      .TypeAndShapeInferenceFunction(
          [](onnx::InferenceContext& ctx) { output_like_input(ctx, 1, 0); });
  return s;
}

// A normalisation's backward (dY, X, scale) -> dX, dScale, dB, each optional: the statistics
// recomputed from X, the parameter gradients in scale's type. With `widened_dy`, dY has a type
// of its own: X's, or float16 / bfloat16 read widened where X is float (its Cast folded in,
// passes/widened_row_grads.h); else X's.
OpSchema norm_grad(const char* name, const char* doc, bool widened_dy = false) {
  OpSchema s = ampc_op_schema(name, doc);
  s.TypeConstraint("T", float_type_strs(), widened_dy ? "X and dX." : "X, dY and dX.")
      .TypeConstraint("T1", float_type_strs(), "scale and the parameter gradients.")
      .Attr("epsilon", "As the forward op's.", AttributeProto::FLOAT, 1e-5f)
      .Input(0, "dY", "Gradient of Y.", widened_dy ? "TD" : "T")
      .Input(1, "X", "The forward op's input.", "T")
      .Input(2, "scale", "The forward op's scale.", "T1")
      .Output(0, "dX", "Gradient of X.", "T", OpSchema::Optional)
      .Output(1, "dScale", "Gradient of scale.", "T1", OpSchema::Optional)
      .Output(2, "dB", "Gradient of B.", "T1", OpSchema::Optional)
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        output_like_input(ctx, 1, 0);
        output_like_input(ctx, 2, 1);
        output_like_input(ctx, 2, 2);
      });
  if (widened_dy)
    s.TypeConstraint("TD", float_type_strs(), "dY: X's type, or 16-bit where X is float.");
  return s;
}

// The backward of BatchNormalization in training mode (batch statistics recomputed from X).
OpSchema batch_norm_grad() {
  return norm_grad("BatchNormalizationGrad",
                   "Gradients of BatchNormalization(X, scale, B, ...; training_mode=1) given dY: "
                   "dX, and the per-channel dScale and dB in scale's type.");
}

// The backward of LayerNormalization (scale of the normalised shape, as
// passes/expand_norm_params.cc leaves it).
OpSchema layer_norm_grad() {
  OpSchema s = norm_grad("LayerNormalizationGrad",
                         "Gradients of LayerNormalization(X, scale, B; axis, epsilon) given dY: "
                         "dX, and dScale and dB (sums over the normalised rows) in scale's type.",
                         true);
  s.Attr("axis", "As the forward op's.", AttributeProto::INT, int64_t{-1});
  return s;
}

// The backward of Softmax / LogSoftmax (opset 13: one axis) from the forward's output.
OpSchema softmax_grad() {
  OpSchema s = ampc_op_schema(
      "SoftmaxGrad",
      "Gradient of Softmax(X; axis) (log = 0) or LogSoftmax(X; axis) (log = 1) given dY and the "
      "forward's output Y: dX = Y * (dY - sum(dY * Y)), or dX = dY - exp(Y) * sum(dY), the sums "
      "along axis.");
  s.TypeConstraint("T", float_type_strs(), "Y and dX.")
      .TypeConstraint("TD", float_type_strs(),
                      "dY: Y's type, or float16 / bfloat16 read widened where Y is float (its "
                      "Cast folded in, passes/widened_row_grads.h).")
      .Attr("axis", "As the forward op's (opset 13 and later).", AttributeProto::INT, int64_t{-1})
      .Attr("log", "1: the forward is LogSoftmax.", AttributeProto::INT, int64_t{0})
      .Input(0, "dY", "Gradient of Y.", "TD")
      .Input(1, "Y", "The forward op's output.", "T")
      .Output(0, "dX", "Gradient of X.", "T")
      .TypeAndShapeInferenceFunction(
          [](onnx::InferenceContext& ctx) { output_like_input(ctx, 1, 0); });
  return s;
}

// ONNX's SoftmaxCrossEntropyLoss with a float16 or bfloat16 Cast to float32 of its scores
// folded in (passes/widened_loss_scores.h): the scores read widened, exactly, and the loss and
// log-probabilities float32, the numbers of Cast + SoftmaxCrossEntropyLoss.
OpSchema widened_cross_entropy() {
  OpSchema s = ampc_op_schema(
      "SoftmaxCrossEntropyLoss",
      "ONNX's SoftmaxCrossEntropyLoss (opset 13) of Cast(scores, float): 16-bit scores read "
      "widened, float32 loss and log-probabilities.");
  s.TypeConstraint("T", {"tensor(float16)", "tensor(bfloat16)"}, "Scores.")
      .TypeConstraint("Tind", {"tensor(int32)", "tensor(int64)"}, "Labels.")
      .TypeConstraint("O", {"tensor(float)"}, "Weights, loss and log-probabilities.")
      .Attr("reduction", "As ONNX's.", AttributeProto::STRING, std::string("mean"))
      .Attr("ignore_index", "As ONNX's.", AttributeProto::INT, onnx::OPTIONAL_VALUE)
      .Input(0, "scores", "Scores [N, C, D1, ...].", "T")
      .Input(1, "labels", "Class indices [N, D1, ...].", "Tind")
      .Input(2, "weights", "Class weights [C].", "O", OpSchema::Optional)
      .Output(0, "output", "The loss: per position (reduction none) or a scalar.", "O")
      .Output(1, "log_prob", "Log-probabilities, the scores' shape.", "O", OpSchema::Optional)
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        onnx::updateOutputElemType(ctx, 0, onnx::TensorProto::FLOAT);
        const auto* reduction = ctx.getAttribute("reduction");
        const bool none = reduction && reduction->s() == "none";
        if (none && onnx::hasInputShape(ctx, 1)) {
          onnx::propagateShapeFromInputToOutput(ctx, 1, 0);
        } else if (!none) {
          onnx::getOutputShape(ctx, 0);  // a scalar: a shape with no dimensions
        }
        if (ctx.getNumOutputs() < 2 || !ctx.getOutputType(1)) return;
        onnx::updateOutputElemType(ctx, 1, onnx::TensorProto::FLOAT);
        if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 1);
      });
  return s;
}

}  // namespace

void register_ampc_schemas() {
  static const bool once = [] {
    onnx::OpSchemaRegistry::DomainToVersionRange::Instance().AddDomainToVersion(
        kAmpcDomain, kAmpcDomainVersion, kAmpcDomainVersion);
    onnx::RegisterSchema(conv_grad());
    onnx::RegisterSchema(layer_norm_grad());
    onnx::RegisterSchema(softmax_grad());
    onnx::RegisterSchema(conv());
    onnx::RegisterSchema(conv_transpose());
    onnx::RegisterSchema(max_pool());
    onnx::RegisterSchema(average_pool());
    onnx::RegisterSchema(global_average_pool());
    for (std::string_view op : ampc_activation_forms()) onnx::RegisterSchema(activation_form(op));
    onnx::RegisterSchema(batch_norm_grad());
    onnx::RegisterSchema(widened_cross_entropy());
    onnx::RegisterSchema(pool_grad("MaxPoolGrad", "Gradient of MaxPool(X) given dY."));
    OpSchema avg = pool_grad("AveragePoolGrad", "Gradient of AveragePool(X) given dY.");
    avg.Attr("count_include_pad", "As the AveragePool's.", AttributeProto::INT,
             static_cast<int64_t>(0));
    onnx::RegisterSchema(std::move(avg));
    return true;
  }();
  (void)once;
}

}  // namespace ampc::ops
