#include "runtime/state_copies.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "base/half.h"
#include "runtime/cpu/op_context.h"

namespace ampc::rt {

std::vector<std::pair<int, int>> rounded_copies(const plan::Plan& plan) {
  std::vector<std::pair<int, int>> out;
  for (const auto& b : plan.buffers()) {
    if (!is_rounded_copy(b)) continue;
    const int master = b.copy_of() - 1;
    if (master < 0 || master >= plan.buffers_size())
      throw Error("plan: buffer '" + b.name() + "' is a copy of a buffer that does not exist");
    const plan::Buffer& m = plan.buffers(master);
    const auto to = static_cast<DType>(b.dtype());
    const bool shapes_match =
        b.shape_known() && m.shape_known() &&
        std::equal(b.shape().begin(), b.shape().end(), m.shape().begin(), m.shape().end());
    if (b.role() != plan::STATE || m.role() != plan::STATE ||
        static_cast<DType>(m.dtype()) != DType::kFloat32 ||
        (to != DType::kFloat16 && to != DType::kBFloat16) || !shapes_match) {
      throw Error("plan: buffer '" + b.name() + "' is not a 16-bit copy of the fp32 state '" +
                  m.name() + "'");
    }
    out.emplace_back(b.id(), master);
  }
  return out;
}

Tensor initial_value(const plan::Plan& plan, const plan::Buffer& b) {
  if (!is_rounded_copy(b)) return cpu::tensor_from_data(b.initial());
  for (const auto& [copy, master] : rounded_copies(plan)) {
    if (copy == b.id())
      return rounded_copy(cpu::tensor_from_data(plan.buffers(master).initial()),
                          static_cast<DType>(b.dtype()));
  }
  throw Error("internal: '" + b.name() + "' is not among the plan's rounded copies");
}

Tensor rounded_copy(const Tensor& master, DType to) {
  Tensor out(to, master.shape());
  const float* x = master.data<float>();
  const int64_t n = master.numel();
  if (to == DType::kBFloat16) {
    BFloat16* y = out.data<BFloat16>();
    for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16(x[i]);
  } else {
    Half* y = out.data<Half>();
    for (int64_t i = 0; i < n; ++i) y[i] = float_to_half(x[i]);
  }
  return out;
}

}  // namespace ampc::rt
