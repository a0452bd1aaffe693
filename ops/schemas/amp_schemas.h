// Operator schemas of the loss scaler, in ampc's own domain "ampc" (version 1, the domain of
// ops/schemas/ampc_schemas.h). Multi-tensor ops: one node covers every gradient of the
// step, as torch's _amp_foreach_non_finite_check_and_unscale_ does.
//
//   UnscaleCheck(inv_scale, G1..Gn) -> found_inf, G1'..Gn'
//       Gi' = Gi * inv_scale (fp32 math); found_inf (bool scalar) is true when any element
//       of any Gi is inf or NaN. An omitted Gi' leaves Gi checked only (the loss scaler's
//       16-bit gradients, which the optimizer unscales as it reads them).
//   UpdateScale(scale, growth_tracker, found_inf) -> scale', growth_tracker'
//       torch's _amp_update_scale_ rule; attributes growth_factor (2.0), backoff_factor
//       (0.5), growth_interval (2000), and the optional bounds min_scale and max_scale.
//   ClipGradNorm(G1..Gn) -> total_norm, G1'..Gn'
//       total_norm = sqrt(sum of squares of every element); with attribute max_norm, the
//       clipped gradients Gi * min(max_norm / (total_norm + 1e-6), 1) (torch's
//       clip_grad_norm_); without it, no gradient outputs (the norm alone, for logging).
#pragma once

namespace ampc::ops {

// Idempotent and thread-safe; call before importing, verifying or checking graphs with
// these ops. (Not from a static initializer: it registers the domain through
// register_ampc_schemas, whose own statics may not be initialized yet.)
void register_amp_schemas();

}  // namespace ampc::ops
