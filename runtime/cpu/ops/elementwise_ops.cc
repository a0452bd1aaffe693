// The elementwise operator family; each group lives in its own elementwise_*.cc file.
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/elementwise_common.h"
#include "runtime/cpu/ops/families.h"

namespace ampc::rt::cpu {

std::vector<int64_t> broadcast_or_fail(const OpContext& ctx, const std::vector<kc::Shape>& shapes) {
  auto out = kc::broadcast_shapes(shapes);
  if (!out) {
    std::string text;
    for (const auto& s : shapes) text += (text.empty() ? "" : " and ") + shape_str(s);
    ctx.fail("input shapes " + text + " do not broadcast");
  }
  return *out;
}

kc::Shape second_operand_shape(const OpContext& ctx) {
  kc::Shape shape = ctx.in(1).shape();
  if (ctx.opset() < 7 && ctx.attr_int("broadcast", 0) != 0 && ctx.has_attr("axis")) {
    const int64_t rank = ctx.in(0).rank();
    int64_t axis = ctx.attr_int("axis");
    if (axis < 0) axis += rank;
    if (axis < 0 || axis + static_cast<int64_t>(shape.size()) > rank) {
      ctx.fail("legacy broadcast axis " + std::to_string(axis) + " does not fit input shapes " +
               shape_str(ctx.in(0).shape()) + " and " + shape_str(shape));
    }
    shape.resize(static_cast<size_t>(rank - axis), 1);
  }
  return shape;
}

void require_same_dtype(const OpContext& ctx, int a, int b) {
  if (ctx.in(a).dtype() != ctx.in(b).dtype()) {
    ctx.fail("inputs " + std::to_string(a) + " and " + std::to_string(b) +
             " have different element types (" + std::string(dtype_name(ctx.in(a).dtype())) + ", " +
             std::string(dtype_name(ctx.in(b).dtype())) + ")");
  }
}

void register_elementwise_ops(OpRegistry& r) {
  register_elementwise_math(r);
  register_elementwise_binary(r);
  register_elementwise_compare(r);
  register_elementwise_variadic(r);
  register_elementwise_convert(r);
  register_elementwise_quantize(r);
}

}  // namespace ampc::rt::cpu
