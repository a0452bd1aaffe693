// Gradients of ops that only move data: the gradient moves back the same way.
#include "passes/autodiff/gradient_registry.h"

namespace ampc::passes::autodiff {
namespace {

using ir::Value;

// Reshape, Flatten, Squeeze, Unsqueeze: same elements, other shape.
void reshape_like(GradContext& c) {
  c.set_input_grad(0, c.b.reshape(c.output_grad(0), *c.input(0)->type.shape));
}

void transpose(GradContext& c) {
  const auto rank = c.input(0)->type.shape->size();
  std::vector<int64_t> perm;
  if (const auto* a = c.node().attr("perm")) {
    perm = a->ints;
  } else {
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  }
  std::vector<int64_t> inverse(rank);
  for (size_t i = 0; i < rank; ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  c.set_input_grad(0, c.b.op("Transpose", {c.output_grad(0)}, c.input(0)->type,
                             attrs(ir::Attribute::make_ints("perm", inverse))));
}

}  // namespace

void register_shape_gradients(GradientRegistry& r) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}) r.add(op, reshape_like);
  r.add("Transpose", transpose);
}

}  // namespace ampc::passes::autodiff
