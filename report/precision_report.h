// `ampc inspect ... --precision-report`: every node (or plan step) with the dtype it computes
// in and the rule that decided it, the Casts with the bytes they move per step, totals, and
// the loss-scaling subgraph; as text and as JSON with the same content. The report comes
// from autocast run on a source model (from_autocast), or from what the compiler produced:
// a plan, or an exported ONNX model lowered to one (report/plan_precision.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "passes/autocast.h"

namespace ampc::report {

// The loss scaler's part of a training step (passes/loss_scaling.h).
struct LossScalingReport {
  std::string mode;  // "dynamic", "static", or "none" (check and skip only, --skip-nonfinite)
  std::optional<double> init_scale;            // amp.scale's initial (or static) value
  std::optional<int64_t> init_growth_tracker;  // amp.growth_tracker's initial value
  std::optional<double> growth_factor, backoff_factor, min_scale, max_scale;
  std::optional<int64_t> growth_interval;
  // ampc.ClipGradNorm: its max_norm, absent when it only computes the norm for the log.
  bool grad_norm = false;
  std::optional<double> clip_grad_norm;
  struct Op {
    std::string node, op;  // op with its domain, e.g. "ampc.UnscaleCheck"
  };
  std::vector<Op> ops;  // the ops that unscale, check, clip and update the scale
  // The skip-step: states whose update is Where(amp.found_inf, old, new).
  std::vector<std::string> guarded_states;
  int64_t state_updates = 0;  // all state updates of the step, guarded or not
  // The 16-bit weight copies (passes/weight_copies.h) the skip-step keeps with their masters;
  // derived state, counted here and not in the two above.
  int64_t guarded_copies = 0;
};

struct PrecisionReport {
  struct Node {
    std::string node;  // the ONNX node; for a plan step, its source nodes
    std::string op;
    DType compute_dtype = DType::kUndefined;  // kUndefined: no float math
    std::string rule;
    int64_t step = -1;  // the plan step's index; -1 for a graph node
  };
  using Cast = passes::AutocastReport::InsertedCast;

  std::string precision;  // "fp32", "fp16", "bf16"
  std::string source;     // "autocast", "plan" or "model"
  std::vector<Node> nodes;
  std::vector<Cast> casts;
  std::vector<std::string> notes;
  std::optional<LossScalingReport> loss_scaling;

  int64_t total_cast_bytes() const;  // sum of the known bytes per step
};

PrecisionReport from_autocast(const passes::AutocastReport& report);

// Keys: precision, source, nodes [{node, op, compute_dtype, rule, step (plans)}], casts [{node,
// value, from, to, numel, bytes_per_step, parameter}], totals {nodes, nodes_low, nodes_fp32,
// casts, parameter_casts, cast_bytes_per_step}, notes [..], loss_scaling (null when the
// step has none; otherwise {mode, init_scale, init_growth_tracker, growth_factor,
// backoff_factor, growth_interval, min_scale, max_scale, grad_norm, clip_grad_norm, ops
// [{node, op}], guarded_updates, state_updates, guarded_states [..], guarded_copies}).
nlohmann::ordered_json precision_report_json(const PrecisionReport& report);
std::string precision_report_text(const PrecisionReport& report, const std::string& title);
// The inverse of precision_report_json (totals are recomputed, not read). Throws ampc::Error
// on JSON of another shape.
PrecisionReport precision_report_from_json(const nlohmann::json& j);

}  // namespace ampc::report
