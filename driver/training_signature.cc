#include "driver/training_signature.h"

#include <algorithm>

#include "passes/grad_accumulation.h"
#include "passes/loss_scaling.h"
#include "passes/lr_schedule.h"
#include "passes/optimizer.h"

namespace ampc::compiler {
namespace {

// Where add_trainer_outputs looks, and the signature field each fills.
struct TrainerOutput {
  const char* value;
  std::string* (plan::TrainingSignature::*field)();
};

const TrainerOutput kTrainerOutputs[] = {
    {passes::kScaleName, &plan::TrainingSignature::mutable_loss_scale},
    {passes::kFoundInfName, &plan::TrainingSignature::mutable_found_inf},
    {passes::kGradNormName, &plan::TrainingSignature::mutable_grad_norm},
    {passes::kStepLrName, &plan::TrainingSignature::mutable_step_lr},
};

bool is_output(const ir::Graph& g, const ir::Value* v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

}  // namespace

void add_trainer_outputs(ir::Model& model) {
  ir::Graph& g = *model.graph;
  for (const auto& o : kTrainerOutputs) {
    ir::Value* v = g.find_value(o.value);
    if (v && !is_output(g, v)) g.outputs.push_back(v);
  }
}

plan::TrainingSignature training_signature(const ir::Model& model,
                                           const std::vector<std::string>& losses,
                                           int64_t micro_batches) {
  const ir::Graph& g = *model.graph;
  plan::TrainingSignature s;
  for (const auto& name : losses) s.add_losses(name);
  if (s.losses_size() == 0 && !g.outputs.empty()) s.add_losses(g.outputs[0]->name);
  for (const auto& o : kTrainerOutputs) {
    if (const ir::Value* v = g.find_value(o.value); v && is_output(g, v)) *(s.*o.field)() = v->name;
  }
  if (const ir::Value* scale = g.find_value(passes::kScaleName); scale && scale->is_initializer())
    s.set_scale_state(scale->name);
  if (const ir::Value* lr = g.find_value(passes::kLrName); lr && lr->is_initializer())
    s.set_lr(lr->name);
  s.set_micro_batches(micro_batches);
  if (const ir::Value* counter = g.find_value(passes::kMicroStepName);
      counter && counter->is_initializer())
    s.set_micro_step(counter->name);
  for (const auto& u : model.state_updates) {
    const std::string& name = u.target->name;
    if (name == passes::kScaleName || name == passes::kGrowthTrackerName) s.add_scaler_state(name);
  }
  return s;
}

}  // namespace ampc::compiler
