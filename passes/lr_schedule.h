// Learning-rate schedules inside the plan, as torch.optim.lr_scheduler computes them with
// scheduler.step() called once per optimizer step (skipped by the GradScaler or not):
//
//   e = the scheduler's step count (0 on the first optimizer step), W = warmup_steps,
//   D = total_steps - W, e' = max(e - W, 0)
//   warm-up (LinearLR(start_factor=s, total_iters=W)): s + (1 - s) * min(e, W) / W
//   then, as SequentialLR starts the second scheduler at W:
//     constant  1
//     step      gamma ^ floor(e' / step_size)                      (StepLR)
//     cosine    m + (1 - m) * (1 + cos(pi * min(e', D) / D)) / 2   (CosineAnnealingLR,
//               eta_min = m * lr; held at eta_min after total_steps)
//     linear    1 + (m - 1) * min(e', D) / D                       (LinearLR(1, m, D))
//   lr = base lr * warm-up * decay, m = min_lr_factor.
//
// The count is the state "optimizer.schedule_step" (fp32, so it resumes from checkpoints);
// the step's lr is the value "optimizer.step_lr", which the trainer logs (kept in a buffer
// as the source of the state "optimizer.last_lr"). Cosine factors are
// a table computed in double at compile time and gathered by the count (no Cos op, which
// the CUDA backend does not run).
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"
#include "passes/autodiff/grad_builder.h"

namespace ampc::passes {

inline constexpr const char* kScheduleStepName = "optimizer.schedule_step";
inline constexpr const char* kStepLrName = "optimizer.step_lr";
inline constexpr const char* kLastLrName = "optimizer.last_lr";  // state: the last step's lr

struct LrSchedule {
  std::string kind = "constant";  // constant | step | cosine | linear
  int64_t warmup_steps = 0;
  double warmup_start_factor = 0.01;
  int64_t total_steps = 0;  // cosine, linear: the step where the decay ends
  int64_t step_size = 0;    // step: decay every this many steps
  double gamma = 0.1;       // step: the factor
  double min_lr_factor = 0;

  bool active() const { return kind != "constant" || warmup_steps > 0; }
};

// Refuses an inconsistent schedule (ampc::Error naming the option).
void check_lr_schedule(const LrSchedule& s);

// Adds the count as state, advanced by one on each run (when `advance`, a bool scalar, is
// null) or on the runs where `advance` holds (the last micro-batch of an accumulated step);
// returns this step's lr, base_lr times the schedule's factor, named kStepLrName.
ir::Value* add_lr_schedule(ir::Model& model, autodiff::GradBuilder& b, ir::Value* base_lr,
                           const LrSchedule& s, ir::Value* advance);

}  // namespace ampc::passes
