#include "tools/ampc/step_outputs.h"

#include <limits>
#include <set>
#include <sstream>

#include "base/error.h"
#include "compiler/pipeline.h"
#include "passes/grad_accumulation.h"
#include "passes/loss_scaling.h"
#include "passes/lr_schedule.h"
#include "runtime/cpu/executor.h"
#include "runtime/cpu/op_context.h"

namespace ampc::cli {

AmpOutputs expose_amp_outputs(plan::Plan& p) {
  AmpOutputs names;
  auto expose = [&p](const char* name, std::string& out) {
    for (auto& b : *p.mutable_buffers()) {
      if (b.name() != name) continue;
      // An activation would be freed after its last reader; an output lives to the end.
      if (b.role() == plan::ACTIVATION) b.set_role(plan::OUTPUT);
      bool bound = false;
      for (const auto& o : p.outputs()) bound |= o.buffer() == b.id();
      if (!bound) {
        auto* o = p.add_outputs();
        o->set_name(name);
        o->set_buffer(b.id());
      }
      out = name;
      return;
    }
  };
  expose(passes::kScaleName, names.scale);
  expose(passes::kFoundInfName, names.found_inf);
  expose(passes::kGradNormName, names.grad_norm);
  expose(passes::kStepLrName, names.step_lr);  // the scheduled lr (passes/lr_schedule.h)
  return names;
}

float scalar_of(const rt::Tensor& t) {
  if (t.dtype() == DType::kFloat32) return t.data<float>()[0];
  if (t.dtype() == DType::kFloat64) return static_cast<float>(t.data<double>()[0]);
  throw Error("the loss is " + t.type_str() + ", not an fp32/fp64 scalar");
}

float compiled_lr(const plan::Plan& p, const rt::Backend& executor) {
  for (const auto& [name, t] : executor.state()) {
    if (name == "optimizer.lr") return scalar_of(t);
  }
  for (const auto& b : p.buffers()) {
    if (b.name() == "optimizer.lr" && b.has_initial())
      return scalar_of(rt::cpu::tensor_from_data(b.initial()));
  }
  return std::numeric_limits<float>::quiet_NaN();
}

int64_t accum_steps_of(const plan::Plan& p) {
  for (const auto& b : p.buffers()) {
    if (b.name() == passes::kLastMicroStepName &&
        b.initial().dtype() == static_cast<int>(DType::kInt64))
      return 1 + rt::cpu::tensor_from_data(b.initial()).data<int64_t>()[0];
  }
  return 1;
}

std::vector<std::string> loss_names(const plan::Plan& p) {
  std::set<std::string> outputs;
  for (const auto& o : p.outputs()) outputs.insert(o.name());
  for (const auto& option : p.options()) {
    if (option.key() != compiler::kLossesOption) continue;
    std::vector<std::string> names;
    std::stringstream list(option.value());
    for (std::string name; std::getline(list, name, ',');) {
      if (!outputs.count(name))
        throw Error("the plan's loss '" + name + "' is not one of its outputs");
      names.push_back(name);
    }
    if (!names.empty()) return names;
  }
  return {p.outputs(0).name()};
}

std::optional<double> current_scale(const rt::Backend& executor) {
  const auto state = executor.state();
  if (auto it = state.find(passes::kScaleName); it != state.end()) return scalar_of(it->second);
  for (const auto& b : executor.plan().buffers()) {  // a static scale is a constant
    if (b.name() == passes::kScaleName && b.initial().dtype() == static_cast<int>(DType::kFloat32))
      return scalar_of(rt::cpu::tensor_from_data(b.initial()));
  }
  return std::nullopt;
}

}  // namespace ampc::cli
