// Operator schemas of ampc's own domain "ampc" (version 1): the gradient ops for which no
// standard ONNX op fits. Registered in ONNX's OpSchemaRegistry, so that graphs using them
// pass ONNX's checker and shape inference, the importer and ampc's verifier.
//
//   ConvGrad(dY, X, W) -> dX, dW, dB        attributes of the Conv (group, kernel_shape,
//                                           strides, pads, dilations, auto_pad)
//   MaxPoolGrad(dY, X) -> dX                attributes of the MaxPool; the gradient goes to
//                                           the first maximum of each window
//   AveragePoolGrad(dY, X) -> dX            attributes of the AveragePool
//   Conv, ConvTranspose, MaxPool,           ONNX's (opsets 11, 11, 12, 11 and 1) with
//   AveragePool, GlobalAveragePool          bfloat16 allowed, which autocast uses in bf16
//                                           plans
//   HardSigmoid, HardSwish, Elu, Celu,      ONNX's (opset 17) with every float type allowed,
//   Selu, Softsign, ThresholdedRelu         for plans whose low dtype ONNX's lack
//                                           (ops/ampc_forms.h)
#pragma once

namespace ampc::ops {

inline constexpr const char* kAmpcDomain = "ampc";
inline constexpr int kAmpcDomainVersion = 1;

// Idempotent and thread-safe; call before importing, verifying or checking such graphs.
void register_ampc_schemas();

}  // namespace ampc::ops
