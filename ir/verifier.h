// Structural and type checks over the IR. Every pass must leave a graph this accepts.
#pragma once

#include "ir/graph.h"

namespace ampc::ir {

struct VerifyOptions {
  // Graph inputs of the main graph must have fully static shapes.
  bool require_static_inputs = true;
};

// Throws ampc::Error naming the first problem: a use before its definition, a value with
// two producers, broken producer/use links, initializer data that does not match its
// type, an undefined graph output, or element types that break the op schema's type
// constraints.
void verify(const Model& model, const VerifyOptions& options = {});

// The type string ONNX op schemas give element type `t` ("tensor(float16)"); "?" for none.
std::string onnx_type_string(DType t);

}  // namespace ampc::ir
