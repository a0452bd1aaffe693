// The elementwise operator family; each group lives in its own elementwise_*.cc file.
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/elementwise_common.h"
#include "runtime/cpu/ops/families.h"

namespace ampc::rt::cpu {

std::vector<int64_t> broadcast_or_fail(const OpContext& ctx, const std::vector<const Tensor*>& inputs) {
  std::vector<kc::Shape> shapes;
  std::string text;
  for (const Tensor* t : inputs) {
    shapes.push_back(t->shape());
    text += (text.empty() ? "" : " and ") + shape_str(t->shape());
  }
  auto out = kc::broadcast_shapes(shapes);
  if (!out) ctx.fail("input shapes " + text + " do not broadcast");
  return *out;
}

void require_same_dtype(const OpContext& ctx, int a, int b) {
  if (ctx.in(a).dtype() != ctx.in(b).dtype()) {
    ctx.fail("inputs " + std::to_string(a) + " and " + std::to_string(b) +
             " have different element types (" + std::string(dtype_name(ctx.in(a).dtype())) +
             ", " + std::string(dtype_name(ctx.in(b).dtype())) + ")");
  }
}

void register_elementwise_ops(OpRegistry& r) {
  register_elementwise_math(r);
  register_elementwise_binary(r);
  register_elementwise_convert(r);
}

}  // namespace ampc::rt::cpu
