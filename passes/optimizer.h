// The optimizer step as graph: for every parameter gradient, the update of the parameter
// and of its optimizer state, with PyTorch's formulas (SGD with momentum / nesterov /
// weight decay; Adam; AdamW). Learning rate, moments and the step counter are state
// initializers; each new value is recorded as a state update of the model.
//
// Skip-step (loss scaling, passes/loss_scaling.h): with `skip` (a bool scalar: found_inf,
// or with gradient accumulation "not the last micro-batch or found_inf",
// grad_accumulation.h), every state update is Where(skip, old, new), so a step with
// non-finite gradients leaves parameters, moments and the step counter with their exact
// bits, decided inside the plan.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/autodiff/autodiff.h"
#include "passes/lr_schedule.h"

namespace ampc::passes {

// The lr the step applies before any schedule: state, so that a checkpoint keeps it.
inline constexpr const char* kLrName = "optimizer.lr";

struct OptimizerOptions {
  std::string kind = "sgd";  // sgd | adam | adamw
  double lr = 1e-3;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  LrSchedule schedule;  // --lr-schedule and friends (lr_schedule.h)
  // Parameter groups by glob over parameter names (fnmatch): no weight decay for those
  // matching a --no-decay pattern; the lr times F for those matching --lr-mult PATTERN=F
  // (the first pattern that matches).
  std::vector<std::string> no_decay;
  std::vector<std::pair<std::string, double>> lr_mult;
};

// `advance` (a bool scalar, or null for every run) tells the runs that end an optimizer
// step, skipped or not: the lr schedule's count advances on them (lr_schedule.h).
void add_optimizer(ir::Model& model, const std::vector<ParameterGradient>& gradients,
                   const OptimizerOptions& options, ir::Value* skip = nullptr,
                   ir::Value* advance = nullptr);

}  // namespace ampc::passes
