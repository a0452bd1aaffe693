#include "passes/grad_accumulation.h"

#include <string>

#include "base/error.h"
#include "passes/autodiff/grad_builder.h"

namespace ampc::passes {
namespace {

using autodiff::GradBuilder;
using ir::Value;

const ir::TensorType kI64Scalar{DType::kInt64, std::vector<int64_t>{}};
const ir::TensorType kBoolScalar{DType::kBool, std::vector<int64_t>{}};

// Gives `v` (and its initializer, if any) a name of the accumulation's vocabulary.
Value* named(ir::Model& model, Value* v, const std::string& name) {
  if (model.graph->find_value(name))
    throw Error("cannot add gradient-accumulation value '" + name +
                "': the model already has a value of that name");
  model.graph->rename_value(v, name);
  if (v->initializer) v->initializer->name = name;
  return v;
}

}  // namespace

AccumulationState add_accumulation_state(ir::Model& model, int64_t steps, Value* scale) {
  if (steps < 1) throw Error("--accum-steps must be at least 1, got " + std::to_string(steps));
  AccumulationState s;
  s.steps = steps;
  s.seed = scale;
  if (steps == 1) return s;
  GradBuilder b(*model.graph, "amp/accum");
  s.micro_step = named(model, b.filled(0.0, kI64Scalar), kMicroStepName);
  Value* last_index =
      named(model, b.scalar(static_cast<double>(steps - 1), DType::kInt64), kLastMicroStepName);
  s.last_micro =
      named(model, b.op("Equal", {s.micro_step, last_index}, kBoolScalar), kLastMicroName);
  // torch's `(loss / N) * scale`: its backward reaches the loss as fp32(scale / N).
  const ir::TensorType f32{DType::kFloat32, std::vector<int64_t>{}};
  Value* numerator = scale ? scale : b.scalar(1.0, DType::kFloat32);
  s.seed = b.op("Div", {numerator, b.scalar(static_cast<double>(steps), DType::kFloat32)}, f32);
  return s;
}

void accumulate_gradients(ir::Model& model, std::vector<ParameterGradient>& gradients,
                          const AccumulationState& state) {
  if (!state.last_micro) return;
  GradBuilder b(*model.graph, "amp/accum");
  for (auto& pg : gradients) {
    // fp32 sums whatever the gradient's dtype (fp64 parameters keep fp64).
    const DType t = pg.gradient->type.dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    const ir::TensorType type{t, pg.gradient->type.shape};
    Value* accum =
        named(model, b.filled(0.0, type), pg.parameter->name + std::string(kGradAccumSuffix));
    Value* sum = b.op("Add", {accum, b.cast(pg.gradient, t)}, type);
    // After the last micro-batch the next step starts from zero, skipped or not (torch's
    // zero_grad after the step).
    model.state_updates.push_back(
        {accum, b.op("Where", {state.last_micro, b.scalar(0.0, t), sum}, type)});
    pg.gradient = sum;
  }
}

void add_micro_step_update(ir::Model& model, const AccumulationState& state) {
  if (!state.last_micro) return;
  GradBuilder b(*model.graph, "amp/accum");
  Value* next = b.op("Add", {state.micro_step, b.scalar(1.0, DType::kInt64)}, kI64Scalar);
  model.state_updates.push_back(
      {state.micro_step,
       b.op("Where", {state.last_micro, b.scalar(0.0, DType::kInt64), next}, kI64Scalar)});
}

Value* skip_predicate(ir::Model& model, Value* found_inf, const AccumulationState& state) {
  if (!state.last_micro) return found_inf;
  GradBuilder b(*model.graph, "amp/accum");
  Value* not_last = b.op("Not", {state.last_micro}, kBoolScalar);
  return found_inf ? b.op("Or", {not_last, found_inf}, kBoolScalar) : not_last;
}

}  // namespace ampc::passes
