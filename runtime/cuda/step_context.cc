#include "runtime/cuda/step_context.h"

#include "base/error.h"
#include "runtime/cpu/op_context.h"

namespace ampc::rt::cuda {

const plan::Buffer& StepContext::input(int k) const {
  if (!has_input(k)) fail("input " + std::to_string(k) + " is required");
  return plan_.buffers(step_.inputs(k));
}

const plan::Buffer& StepContext::output(int k) const {
  if (!has_output(k)) fail("output " + std::to_string(k) + " is required");
  return plan_.buffers(step_.outputs(k));
}

std::vector<int64_t> StepContext::in_shape(int k) const {
  const auto& b = input(k);
  return {b.shape().begin(), b.shape().end()};
}

std::vector<int64_t> StepContext::out_shape(int k) const {
  const auto& b = output(k);
  return {b.shape().begin(), b.shape().end()};
}

int64_t StepContext::in_numel(int k) const {
  return numel_of(in_shape(k));
}
int64_t StepContext::out_numel(int k) const {
  return numel_of(out_shape(k));
}

Tensor StepContext::constant(int k, const std::string& what) const {
  const plan::Buffer& b = input(k);
  if (b.role() != plan::CONSTANT || !b.has_initial()) {
    fail(what + " (input " + std::to_string(k) + ", '" + b.name() +
         "') must be a constant of the plan on the CUDA backend");
  }
  return cpu::tensor_from_data(b.initial());
}

std::vector<int64_t> StepContext::constant_ints(int k, const std::string& what) const {
  const Tensor t = constant(k, what);
  if (t.dtype() == DType::kInt64) return {t.data<int64_t>(), t.data<int64_t>() + t.numel()};
  if (t.dtype() == DType::kInt32) return {t.data<int32_t>(), t.data<int32_t>() + t.numel()};
  fail(what + " must be int32 or int64, got " + t.type_str());
}

void StepContext::require_dtype(int k, std::initializer_list<DType> dtypes, bool output) const {
  const DType t = output ? out_dtype(k) : in_dtype(k);
  for (DType d : dtypes) {
    if (d == t) return;
  }
  std::string names;
  for (DType d : dtypes) names += (names.empty() ? "" : ", ") + std::string(dtype_name(d));
  fail(std::string(output ? "output " : "input ") + std::to_string(k) + " of type " +
       std::string(dtype_name(t)) + " is not supported by the CUDA backend (supported: " + names +
       ")");
}

WorkspacePtr StepContext::workspace(int64_t bytes) const {
  memory_.reserve_workspace(bytes);
  return {&memory_};
}

}  // namespace ampc::rt::cuda
