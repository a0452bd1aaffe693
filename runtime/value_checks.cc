#include "runtime/value_checks.h"

#include "base/error.h"
#include "runtime/state_copies.h"

namespace ampc::rt {

std::string buffer_type(const plan::Buffer& b) {
  return std::string(dtype_name(static_cast<DType>(b.dtype()))) +
         (b.shape_known() ? shape_str({b.shape().begin(), b.shape().end()}) : "[*]");
}

std::vector<std::pair<int, const Tensor*>> checked_inputs(
    const plan::Plan& plan, const std::map<std::string, Tensor>& inputs) {
  for (const auto& [name, t] : inputs) {
    bool known = false;
    for (const auto& b : plan.inputs()) known |= (b.name() == name);
    if (!known) throw Error("the plan has no input named '" + name + "'");
  }
  std::vector<std::pair<int, const Tensor*>> out;
  for (const auto& binding : plan.inputs()) {
    auto it = inputs.find(binding.name());
    const auto& buf = plan.buffers(binding.buffer());
    if (it == inputs.end())
      throw Error("input '" + binding.name() + "' (" + buffer_type(buf) + ") is not given");
    const Tensor& t = it->second;
    const bool shape_ok = !buf.shape_known() ||
                          std::vector<int64_t>(buf.shape().begin(), buf.shape().end()) == t.shape();
    if (static_cast<DType>(buf.dtype()) != t.dtype() || !shape_ok) {
      throw Error("input '" + binding.name() + "' must be " + buffer_type(buf) + ", got " +
                  t.type_str());
    }
    out.emplace_back(binding.buffer(), &t);
  }
  return out;
}

std::vector<std::pair<int, const Tensor*>> checked_state_values(
    const plan::Plan& plan, const std::map<std::string, Tensor>& values) {
  std::vector<std::pair<int, const Tensor*>> out;
  for (const auto& b : plan.buffers()) {
    if (b.role() != plan::STATE || is_rounded_copy(b)) continue;  // copies are recomputed
    auto it = values.find(b.name());
    if (it == values.end()) throw Error("no value for state '" + b.name() + "'");
    const Tensor& t = it->second;
    const std::vector<int64_t> shape(b.shape().begin(), b.shape().end());
    if (static_cast<DType>(b.dtype()) != t.dtype() || (b.shape_known() && shape != t.shape()))
      throw Error("state '" + b.name() + "' must be " + buffer_type(b) + ", got " + t.type_str());
    out.emplace_back(b.id(), &t);
  }
  return out;
}

}  // namespace ampc::rt
