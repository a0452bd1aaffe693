// What a training plan's run reports besides its state, shared by `ampc train` and the
// Python API (python/), read from the plan's training signature (plan.proto
// TrainingSignature): the loss scaler's outputs, the loss outputs, the micro-batches per
// optimizer step, the lr and loss scale the plan holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::cli {

// The loss scaler's values the log reports, which the compiler made plan outputs so that a
// step returns them with the loss: the scale the step used (state before its update),
// found_inf, the gradients' global norm, the scheduled lr. Absent ones (no scaling, no
// check, no norm, no schedule) are empty.
struct AmpOutputs {
  std::string scale, found_inf, grad_norm, step_lr;
};

// The training signature of a training plan; throws ampc::Error for a plan without one.
const plan::TrainingSignature& training_signature(const plan::Plan& p);

AmpOutputs amp_outputs(const plan::Plan& p);

// The value of an fp32/fp64 scalar; throws ampc::Error for anything else.
float scalar_of(const rt::Tensor& t);

// The lr the plan was compiled with: the signature's lr state (a resumed checkpoint's) or
// constant; NaN (null in the log) for a plan without one.
float compiled_lr(const rt::Backend& executor);

// Micro-batches per optimizer step (passes/grad_accumulation.h), 1 without accumulation.
int64_t accum_steps_of(const plan::Plan& p);

// The outputs the plan minimises (--loss, else the model's first output).
std::vector<std::string> loss_names(const plan::Plan& p);

// The loss scale after the last step (the state), when the plan scales the loss.
std::optional<double> current_scale(const rt::Backend& executor);

}  // namespace ampc::cli
