#include "frontend/onnx/where_scalar_types.h"

#include <string>

#include "base/error.h"

namespace ampc::onnx_io {
namespace {

// A one-element value of `dtype` made by a Constant node.
bool scalar_constant(const ir::Value* v, DType dtype) {
  return v && v->type.dtype == dtype && v->type.shape && ir::shape_numel(*v->type.shape) == 1 &&
         v->producer && v->producer->op_type == "Constant" && v->producer->domain.empty();
}

bool narrow_float(const ir::Value* v) {
  return v && (v->type.dtype == DType::kFloat32 || v->type.dtype == DType::kFloat16 ||
               v->type.dtype == DType::kBFloat16);
}

}  // namespace

void refuse_double_scalar_where(const ir::Graph& g) {
  for (const auto& n : g.nodes) {
    if (n->op_type != "Where" || !n->domain.empty() || n->inputs.size() != 3) continue;
    for (size_t k : {1, 2}) {
      if (!narrow_float(n->inputs[3 - k])) continue;
      const std::string beside =
          "node " + n->label() + ": its " + (k == 1 ? "first" : "second") + " branch is a";
      const std::string data = std::string(dtype_name(n->inputs[3 - k]->type.dtype)) + " data";
      if (scalar_constant(n->inputs[k], DType::kFloat64)) {
        throw Error(beside + " double constant beside " + data +
                    ": torch 1.13 exports a Python float in torch.where so, and computes what "
                    "follows in double; write x.masked_fill(~mask, value) or "
                    "torch.where(mask, x, torch.tensor(value)) instead");
      }
      if (scalar_constant(n->inputs[k], DType::kInt64)) {
        throw Error(beside + "n int64 constant beside " + data +
                    ": torch 1.13 exports a Python int in torch.where so, and ONNX's Where "
                    "takes one type for both; write x.masked_fill(~mask, value) or "
                    "torch.where(mask, x, torch.tensor(value, dtype=x.dtype)) instead");
      }
    }
  }
}

}  // namespace ampc::onnx_io
