// Gradients of ReduceSum and ReduceMean: the output gradient spread back over the reduced
// axes (divided by their size for the mean).
#include "passes/autodiff/gradient_registry.h"

#include <cstring>

namespace ampc::passes::autodiff {
namespace {

using ir::Value;

// Reduced axes (attribute before opset 18 for most reductions, input for ReduceSum 13+).
std::vector<int64_t> reduced_axes(GradContext& c, int64_t rank) {
  std::vector<int64_t> axes;
  if (const auto* a = c.node().attr("axes")) {
    axes = a->ints;
  } else if (c.input(1)) {
    const Value* v = c.input(1);
    if (!v->initializer) c.fail("reduction axes must be constant for training");
    axes.resize(static_cast<size_t>(v->initializer->numel()));
    std::memcpy(axes.data(), v->initializer->bytes.data(), axes.size() * 8);
  }
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) == 0) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  return axes;
}

void reduce(GradContext& c, bool mean) {
  const auto& in_type = c.input(0)->type;
  const auto& in_shape = *in_type.shape;
  const auto rank = static_cast<int64_t>(in_shape.size());
  const auto axes = reduced_axes(c, rank);
  std::vector<int64_t> kept = in_shape;
  int64_t count = 1;
  for (int64_t a : axes) {
    count *= in_shape[static_cast<size_t>(a)];
    kept[static_cast<size_t>(a)] = 1;
  }
  Value* dy = c.b.reshape(c.output_grad(0), kept);
  if (mean)
    dy = c.b.op("Div", {dy, c.b.scalar(static_cast<double>(count), in_type.dtype)}, dy->type);
  c.set_input_grad(0, c.b.op("Expand", {dy, c.b.ints(in_shape)}, in_type));
}

}  // namespace

void register_reduce_gradients(GradientRegistry& r) {
  r.add("ReduceSum", [](GradContext& c) { reduce(c, false); });
  r.add("ReduceMean", [](GradContext& c) { reduce(c, true); });
}

}  // namespace ampc::passes::autodiff
