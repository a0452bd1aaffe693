// What the schemas of ampc's domain "ampc" are built from: this folder's gradient ops
// (ampc_schemas.cc), the loss scaler's (ops/schemas/amp_schemas.cc) and data-parallel
// training's (ops/schemas/comm_schemas.cc).
#pragma once

#include <string>
#include <vector>

#include <onnx/defs/schema.h>

namespace ampc::ops {

// The type strings of fp16, bf16, fp32 and fp64 tensors: a float type parameter's.
const std::vector<std::string>& float_type_strs();

// A schema `name` of the "ampc" domain (at its version) documented by `doc`.
onnx::OpSchema ampc_op_schema(const char* name, const char* doc);

// Shape inference: output `out` gets the element type and shape of input `in`; nothing when
// the node has no output `out`.
void output_like_input(onnx::InferenceContext& ctx, size_t in, size_t out);

}  // namespace ampc::ops
