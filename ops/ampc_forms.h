// The ops of ONNX's default domain that autocast writes in ampc's domain where a plan's low
// dtype is missing from their schemas. libonnx 1.12 knows opsets up to 17, where Conv,
// ConvTranspose, the pooling ops of CNNs and several of torch.nn's activations have no
// bfloat16 (Celu has no float16 either), while PyTorch's autocast runs them in the low dtype.
// Their ampc forms are the same ops (attributes, semantics, kernels, gradient rules) with the
// dtype allowed; the schemas are in schemas/ampc_schemas.cc.
#pragma once

#include <string_view>
#include <vector>

namespace ampc::ops {

// Whether ONNX's `op` has an ampc form (Conv, ConvTranspose, MaxPool, AveragePool,
// GlobalAveragePool and the activations below).
bool has_ampc_form(std::string_view op);

// The elementwise activations among them. Each one's ampc form is a copy of the ONNX op's
// entries: its schema with the float types widened, its op-table row, CPU op and gradient
// rule (the registries copy them; the fused kernels' builder reads the op's name).
const std::vector<std::string_view>& ampc_activation_forms();

}  // namespace ampc::ops
