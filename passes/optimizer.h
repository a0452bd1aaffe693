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

#include "compiler/ir/graph.h"
#include "passes/autodiff/autodiff.h"

namespace ampc::passes {

struct OptimizerOptions {
  std::string kind = "sgd";  // sgd | adam | adamw
  double lr = 1e-3;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

void add_optimizer(ir::Model& model, const std::vector<ParameterGradient>& gradients,
                   const OptimizerOptions& options, ir::Value* skip = nullptr);

}  // namespace ampc::passes
