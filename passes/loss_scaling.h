// Dynamic loss scaling with GradScaler semantics (../shared/amp-semantics.md section 3), as
// graph: the scale and growth tracker are state initializers ("amp.scale",
// "amp.growth_tracker"), the backward is seeded with the scale instead of 1, one
// ampc.UnscaleCheck node unscales every gradient and computes "amp.found_inf" (a gradient
// that widens autocast's 16-bit one is checked in 16 bits and unscaled where it is read,
// so it is never stored in fp32), and one
// ampc.UpdateScale node computes the next scale. The skip-step itself is the optimizer's
// (passes/optimizer.h: every state update predicated on found_inf), so the decision never
// leaves the plan.
//
// Order in the pipeline: add_loss_scale_state, differentiate (seed = the scale),
// unscale_and_check, clip_gradients (grad_clipping.h), add_optimizer(found_inf),
// add_scale_update. Gradient accumulation (grad_accumulation.h) fits in between.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/autocast.h"
#include "passes/autodiff/autodiff.h"

namespace ampc::passes {

struct LossScaleOptions {
  // "dynamic" | "static:S" | "none"; empty: dynamic for fp16, none for bf16 and fp32.
  std::string mode;
  // The forward's precision, which picks the default mode (the pipeline fills it).
  Precision precision = Precision::kFP32;
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  std::optional<double> min_scale;
  std::optional<double> max_scale;
  // Check the gradients and skip steps with non-finite ones even without scaling.
  bool skip_nonfinite = false;
  // clip_grad_norm_ after unscaling when > 0.
  double clip_grad_norm = 0.0;
  // Compute the global gradient norm ("amp.grad_norm") for the log even without clipping.
  bool log_grad_norm = false;
};

// Names of the values the loss scaler adds; the trainer exposes the last three as plan
// outputs for its log (amp.scale is the scale the step used).
inline constexpr const char* kScaleName = "amp.scale";
inline constexpr const char* kGrowthTrackerName = "amp.growth_tracker";
inline constexpr const char* kFoundInfName = "amp.found_inf";
inline constexpr const char* kGradNormName = "amp.grad_norm";
// State holding the previous step's norm when only the log asks for it (grad_clipping.h).
inline constexpr const char* kLastGradNormName = "amp.last_grad_norm";

// The options with the mode resolved and checked: one of "dynamic", "static", "none".
struct LossScaleConfig {
  std::string mode;
  double static_scale = 1.0;
  LossScaleOptions options;
  bool checks() const { return mode != "none" || options.skip_nonfinite; }
};
LossScaleConfig resolve_loss_scale(const LossScaleOptions& options);

struct LossScaleState {
  ir::Value* scale = nullptr;           // null without scaling
  ir::Value* growth_tracker = nullptr;  // null unless dynamic
};

// Adds the scale ("amp.scale": state when dynamic, a constant when static) and the growth
// tracker. Call before differentiate() and seed it with state.scale.
LossScaleState add_loss_scale_state(ir::Model& model, const LossScaleConfig& config);

// Unscales every gradient (replaced in place) and returns found_inf ("amp.found_inf", a
// bool scalar); null when the configuration checks nothing.
ir::Value* unscale_and_check(ir::Model& model, const LossScaleState& state,
                             std::vector<ParameterGradient>& gradients,
                             const LossScaleConfig& config);

// The scale update (dynamic mode only): amp.scale and amp.growth_tracker get state updates.
// With `apply` (a bool scalar: the last micro-batch of an accumulated step), they keep
// their bits when it is false.
void add_scale_update(ir::Model& model, const LossScaleState& state, ir::Value* found_inf,
                      const LossScaleConfig& config, ir::Value* apply = nullptr);

}  // namespace ampc::passes
