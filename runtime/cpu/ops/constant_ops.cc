// Constant: its value attribute (tensor, or one of the scalar/list forms of opset 12+).
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"

namespace ampc::rt::cpu {
namespace {

void constant(OpContext& ctx) {
  if (auto t = ctx.attr_tensor("value")) {
    ctx.set_output(0, std::move(*t));
  } else if (ctx.has_attr("value_float")) {
    ctx.output(0, DType::kFloat32, {}).data<float>()[0] = ctx.attr_float("value_float", 0);
  } else if (ctx.has_attr("value_int")) {
    ctx.output(0, DType::kInt64, {}).data<int64_t>()[0] = ctx.attr_int("value_int", 0);
  } else if (ctx.has_attr("value_floats")) {
    auto v = ctx.attr_floats("value_floats");
    auto& out = ctx.output(0, DType::kFloat32, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), out.data<float>());
  } else if (ctx.has_attr("value_ints")) {
    auto v = ctx.attr_ints("value_ints");
    auto& out = ctx.output(0, DType::kInt64, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), out.data<int64_t>());
  } else {
    ctx.fail(
        "no supported value attribute (value, value_float(s), value_int(s)); sparse values are not "
        "supported");
  }
}

}  // namespace

void register_constant_ops(OpRegistry& r) {
  r.add("Constant", constant);
}

}  // namespace ampc::rt::cpu
