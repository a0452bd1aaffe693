// What a training plan's run reports besides its state, shared by `ampc train` and the
// Python API (python/): the loss scaler's values exposed as plan outputs, the loss outputs,
// the micro-batches per optimizer step, the lr and loss scale the plan holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::cli {

// The loss scaler's values the log reports (passes/loss_scaling.h), as plan outputs, so that
// a step returns them with the loss instead of the trainer reading the whole state: the
// scale the step used (state before its update), found_inf, the gradients' global norm.
// Absent ones (no scaling, no check, no norm) stay unset.
struct AmpOutputs {
  std::string scale, found_inf, grad_norm, step_lr;
};

// Makes those values outputs of `p` (before an executor is built from it) and names them.
AmpOutputs expose_amp_outputs(plan::Plan& p);

// The value of an fp32/fp64 scalar; throws ampc::Error for anything else.
float scalar_of(const rt::Tensor& t);

// The lr the plan was compiled with: the state "optimizer.lr" (a resumed checkpoint's) or
// the plan's constant of that name; NaN (null in the log) for a plan without one.
float compiled_lr(const plan::Plan& p, const rt::Backend& executor);

// Micro-batches per optimizer step: 1 + the constant amp.last_micro_step of an accumulating
// plan (passes/grad_accumulation.h), 1 without it.
int64_t accum_steps_of(const plan::Plan& p);

// The outputs the plan minimises: those it was compiled with (--loss, recorded in the
// plan's options), else its first output.
std::vector<std::string> loss_names(const plan::Plan& p);

// The loss scale after the last step (the state), when the plan scales the loss.
std::optional<double> current_scale(const rt::Backend& executor);

}  // namespace ampc::cli
