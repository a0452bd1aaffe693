// Gradient accumulation over N micro-batches (--accum-steps N) as graph, so that the plan
// stays one plan run once per micro-batch with every decision inside it:
// - "amp.micro_step" (int64 state) counts the micro-batches of the optimizer step; the
//   micro-batch that finds it at N - 1 (the int64 constant "amp.last_micro_step", from
//   which the trainer reads N) ends the step ("amp.last_micro", a bool scalar) and resets
//   it to 0.
// - The backward is seeded with scale / N (1 / N without scaling): torch's `loss / N`.
// - "<parameter>.grad_accum" (fp32 state; fp64 for an fp64 parameter) holds the sum of the
//   step's (scaled) gradients; the unscale, check, clipping and optimizer read the sum of
//   this micro-batch included, and the sum resets to zero after the last micro-batch.
//   Non-finite values stay non-finite when added to, so the check of the sum covers every
//   micro-batch of the step (found_inf is OR-ed across them without a state of its own).
// - The optimizer skips unless last_micro and not found_inf (skip_predicate); the scale
//   update applies on the last micro-batch only (add_scale_update's `apply`).
// N = 1 adds nothing.
//
// Order in the pipeline: add_loss_scale_state, add_accumulation_state, differentiate (seed
// = AccumulationState::seed), accumulate_gradients, unscale_and_check, clip_gradients,
// add_optimizer(skip_predicate(...)), add_scale_update(..., last_micro),
// add_micro_step_update, fold_constants.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "passes/autodiff/autodiff.h"

namespace ampc::passes {

inline constexpr const char* kMicroStepName = "amp.micro_step";
inline constexpr const char* kLastMicroStepName = "amp.last_micro_step";
inline constexpr const char* kLastMicroName = "amp.last_micro";
inline constexpr const char* kGradAccumSuffix = ".grad_accum";

struct AccumulationState {
  int64_t steps = 1;                // N
  ir::Value* micro_step = nullptr;  // state; null when N == 1
  ir::Value* last_micro = nullptr;  // null when N == 1
  ir::Value* seed = nullptr;        // the backward's seed; `scale` itself when N == 1
};

// The micro-step counter and the seed scale / N (`scale` may be null: no loss scaling).
// N < 1 is an error.
AccumulationState add_accumulation_state(ir::Model& model, int64_t steps, ir::Value* scale);

// The counter's update micro_step <- last_micro ? 0 : micro_step + 1. It must exist before
// constant folding runs: the folder treats a state without an update as a constant.
void add_micro_step_update(ir::Model& model, const AccumulationState& state);

// Replaces every gradient by the accumulated sum including it and records the
// accumulators' state updates. Nothing when N == 1.
void accumulate_gradients(ir::Model& model, std::vector<ParameterGradient>& gradients,
                          const AccumulationState& state);

// When the optimizer must leave every state as it is: found_inf, or "not last_micro", or
// their Or; null when neither applies.
ir::Value* skip_predicate(ir::Model& model, ir::Value* found_inf, const AccumulationState& state);

}  // namespace ampc::passes
