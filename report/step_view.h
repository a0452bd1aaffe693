// The training step (or forward plan) as a graph to look at: every ONNX node with its phase
// (forward, backward, loss scaling, optimizer, skip-step, statistics), name scope, compute
// dtype and the rule that decided it, the fused kernel and plan step that run it, and the
// tensors between nodes with their memory offset and size. `ampc inspect ... --dot/--svg/
// --html` draws it (step_view_dot.h, step_view_html.h); step_view_filter.h narrows it.
//
// It is built from a plan, with the graph the plan was emitted from when there is one (a
// source model compiled with the compile options, an exported training model compiled as it
// is, or a plan's embedded training model): nodes and edges come from the graph, kernels,
// steps and memory from the plan. Plan steps whose nodes the graph lacks (recomputed casts,
// range statistics) take their inputs and outputs from the step's buffers; a fused kernel
// without a graph chains its member nodes in order.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/plan/step_phase.h"

namespace ampc::report {

// Phases, in the order they run; also the clusters of the pictures.
// The compiler's phases (runtime/plan/step_phase.h), the inputs before them and the
// skip-step (the optimizer's Wheres on found_inf) apart.
inline constexpr const char* kPhaseInputs = "inputs";
inline constexpr const char* kPhaseForward = plan::phase_name(plan::FORWARD);
inline constexpr const char* kPhaseBackward = plan::phase_name(plan::BACKWARD);
inline constexpr const char* kPhaseLossScaling = plan::phase_name(plan::LOSS_SCALING);
inline constexpr const char* kPhaseOptimizer = plan::phase_name(plan::OPTIMIZER);
inline constexpr const char* kPhaseSkipStep = "skip-step";
inline constexpr const char* kPhaseStatistics = plan::phase_name(plan::STATISTICS);
const std::vector<std::string>& view_phases();

struct ViewTensor {
  std::string name;
  std::string type;        // "f16[32,64]"
  std::string dtype;       // "fp32", "fp16", "bf16", "int64", ...
  int64_t bytes = -1;      // -1: shape not static
  std::string region;      // "arena", "state", "constants", "inputs"; empty: not planned
  int64_t offset = -1;     // in its region
  std::string alias_of;    // the buffer whose storage it shares
  bool internal = false;   // lives inside a fused kernel (no buffer)
  bool found_inf = false;  // amp.found_inf: what the skip-step reads
  nlohmann::json grad;     // --grad-stats record of this tensor (null when none)
};

struct ViewNode {
  std::string name;
  std::string op;  // with its domain when not ONNX's, e.g. "ampc.UnscaleCheck"
  std::string phase;
  std::vector<std::string> scope;    // name scope below the phase: {"blocks.0", "attn"}
  std::string dtype;                 // compute dtype: "fp32", "fp16", "bf16", "" (no float math)
  std::string rule;                  // deciding rule; empty when none was recorded
  bool inserted_cast = false;        // a Cast that autocast (or --half-inputs) inserted
  int64_t cast_bytes = -1;           // bytes an inserted cast moves per step
  std::string kernel;                // the fused kernel (or epilogue GEMM step) that runs it
  int64_t step = -1;                 // plan step index
  std::vector<int> inputs, outputs;  // indices into StepView::tensors
  nlohmann::json grad;               // --grad-stats record naming this node (null when none)
  std::string change;                // before/after view: "fp32 -> fp16", "inserted", ...
};

struct StepView {
  std::string title;
  std::string precision;        // "fp32", "fp16", "bf16"
  std::string origin;           // "model", "training model", "plan"
  std::vector<ViewNode> nodes;  // in execution order
  std::vector<ViewTensor> tensors;
};

// Which phase a node belongs to: the part of the step the compiler recorded for it
// (Step.source_phases); Wheres that read found_inf are the skip-step.
std::string phase_of(plan::StepPhase phase, const std::string& op, bool reads_found_inf);
// The name scope of a node below its phase prefix: "/blocks.0/attn/MatMul" -> {"blocks.0",
// "attn"}; "grad//blocks.0/attn/MatMul/MatMul_node_5" -> {"blocks.0", "attn", "MatMul"}.
std::vector<std::string> scope_of(const std::string& node_name);

// `graph` may be null (a forward plan without its graph).
StepView build_step_view(const plan::Plan& plan, const ir::Model* graph, const std::string& title,
                         const std::string& origin);

// Attaches a `ampc train --grad-stats` log (JSON lines; the last recorded step per tensor)
// to the tensors it names and to the nodes of its `node` field. Throws ampc::Error on a line
// that is not a record.
void attach_grad_stats(StepView& view, const std::string& jsonl_path);

// The whole view as JSON (what the page embeds): {title, precision, origin, phases, nodes
// [{name, op, phase, scope, dtype, rule, cast, cast_bytes, kernel, step, in, out, grad,
// change}], tensors [{name, type, dtype, bytes, region, offset, alias_of, internal,
// found_inf, grad}]}.
nlohmann::json step_view_json(const StepView& view);

}  // namespace ampc::report
