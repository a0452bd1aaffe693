// Comparisons (bool output), logic on bool tensors, and bit shifts; numpy broadcasting.
#include <string>

#include "runtime/cpu/ops/elementwise_common.h"

namespace ampc::rt::cpu {

using kc::kBoolType;
using kc::kNumeric;

void register_elementwise_compare(OpRegistry& r) {
  add_binary<kc::kAllTypes, true>(r, "Equal", [](auto a, auto b) { return a == b; });
  add_binary<kNumeric, true>(r, "Less", [](auto a, auto b) { return a < b; });
  add_binary<kNumeric, true>(r, "LessOrEqual", [](auto a, auto b) { return a <= b; });
  add_binary<kNumeric, true>(r, "Greater", [](auto a, auto b) { return a > b; });
  add_binary<kNumeric, true>(r, "GreaterOrEqual", [](auto a, auto b) { return a >= b; });
  add_binary<kBoolType>(r, "And", [](bool a, bool b) { return a && b; });
  add_binary<kBoolType>(r, "Or", [](bool a, bool b) { return a || b; });
  add_binary<kBoolType>(r, "Xor", [](bool a, bool b) { return a != b; });
  r.add("BitShift", [](OpContext& ctx) {
    const std::string dir = ctx.attr_string("direction", "");
    if (dir != "LEFT" && dir != "RIGHT") {
      ctx.fail("attribute 'direction' value '" + dir + "' is not supported");
    }
    const bool left = dir == "LEFT";
    binary_op<kc::kUnsigned>(ctx, [left](auto a, auto b) {
      using V = decltype(a);
      if (b >= sizeof(V) * 8) return V(0);
      return static_cast<V>(left ? a << b : a >> b);
    });
  });
}

}  // namespace ampc::rt::cpu
