#include "tools/ampc/step_outputs.h"

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

#include "base/error.h"
#include "runtime/cpu/executor.h"
#include "runtime/cpu/op_context.h"

namespace ampc::cli {

const plan::TrainingSignature& training_signature(const plan::Plan& p) {
  if (!p.has_training() || p.training().losses_size() == 0)
    throw Error("the plan has no training signature: it is a forward plan");
  return p.training();
}

AmpOutputs amp_outputs(const plan::Plan& p) {
  const plan::TrainingSignature& s = training_signature(p);
  return {s.loss_scale(), s.found_inf(), s.grad_norm(), s.step_lr()};
}

float scalar_of(const rt::Tensor& t) {
  if (t.dtype() == DType::kFloat32) return t.data<float>()[0];
  if (t.dtype() == DType::kFloat64) return static_cast<float>(t.data<double>()[0]);
  throw Error("the loss is " + t.type_str() + ", not an fp32/fp64 scalar");
}

namespace {

// The value of the state `name` after the last step, else the plan's constant of that name.
std::optional<rt::Tensor> state_or_constant(const rt::Backend& executor, const std::string& name) {
  if (name.empty()) return std::nullopt;
  const auto state = executor.state();
  if (auto it = state.find(name); it != state.end()) return it->second;
  for (const auto& b : executor.plan().buffers()) {
    if (b.name() == name && b.has_initial()) return rt::cpu::tensor_from_data(b.initial());
  }
  return std::nullopt;
}

}  // namespace

float compiled_lr(const rt::Backend& executor) {
  const auto lr = state_or_constant(executor, training_signature(executor.plan()).lr());
  return lr ? scalar_of(*lr) : std::numeric_limits<float>::quiet_NaN();
}

int64_t accum_steps_of(const plan::Plan& p) {
  return std::max<int64_t>(1, training_signature(p).micro_batches());
}

std::vector<std::string> loss_names(const plan::Plan& p) {
  std::set<std::string> outputs;
  for (const auto& o : p.outputs()) outputs.insert(o.name());
  std::vector<std::string> names;
  for (const auto& name : training_signature(p).losses()) {
    if (!outputs.count(name))
      throw Error("the plan's loss '" + name + "' is not one of its outputs");
    names.push_back(name);
  }
  return names;
}

std::optional<double> current_scale(const rt::Backend& executor) {
  const auto scale = state_or_constant(executor, training_signature(executor.plan()).scale_state());
  if (!scale) return std::nullopt;
  return scalar_of(*scale);
}

}  // namespace ampc::cli
