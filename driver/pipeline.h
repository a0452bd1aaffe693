// The compile pipeline: every pass over the IR, in order, run by a PassManager
// (pass_manager.h), then lowering, plan emission and the memory plan (pipeline.cc).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "driver/pass_manager.h"
#include "driver/stage_timer.h"
#include "frontend/onnx/import.h"
#include "ir/graph.h"
#include "lower/lowering.h"
#include "passes/autocast.h"
#include "passes/autodiff/autodiff.h"
#include "passes/data_parallel.h"
#include "passes/loss_scaling.h"
#include "passes/optimizer.h"
#include "passes/range_stats.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::compiler {

// The plan option (Plan.options) saying which running-variance update a training plan's
// BatchNorms make, "unbiased" (PyTorch's) or "biased" (ONNX's); absent without one.
inline constexpr const char* kRunningVarianceOption = "batchnorm-running-var";

// The plan option (Plan.options) naming the loss outputs a training plan minimises, comma-
// separated, when they were chosen (--loss); absent otherwise (the only output is the loss).
inline constexpr const char* kLossesOption = "loss";

struct CompileOptions {
  onnx_io::ImportOptions import;
  // Training: differentiate the loss and add the optimizer step; otherwise a forward plan.
  // A model in ONNX's training format (it has state updates once imported) already holds
  // its training step, which is used as it is.
  bool train = false;
  passes::AutodiffOptions autodiff;
  passes::OptimizerOptions optimizer;
  // Loss scaling, non-finite skip-step and gradient clipping (passes/loss_scaling.h).
  passes::LossScaleOptions loss_scale;
  // Gradient accumulation: one optimizer step per this many runs of the plan
  // (passes/grad_accumulation.h); 1 adds nothing to the graph.
  int64_t accum_steps = 1;
  // Data parallel: gradients all-reduced over the ranks before unscale (passes/data_parallel.h).
  passes::DataParallelOptions data_parallel;
  // Mixed precision: autocast of the forward graph (passes/autocast.h); fp32 leaves the
  // graph as it is.
  passes::AutocastOptions autocast;
  // fp16 range statistics of the gradients / activations as plan outputs
  // (passes/range_stats.h, `ampc train --grad-stats`); none by default.
  passes::RangeStatsOptions range_stats;
  // BatchNormalization's running variance (passes/running_statistics.h,
  // --batchnorm-running-var): PyTorch's update with the batch's unbiased variance (true) or
  // ONNX's with the biased one (false). Unset: PyTorch's for a model PyTorch exported (its
  // producer_name "pytorch": nn.BatchNorm's semantics), ONNX's for any other.
  std::optional<bool> unbiased_running_variance;
  // --half-inputs: float32 data inputs become inputs of the low dtype (passes/half_inputs.h).
  bool half_inputs = false;
  // --recast-weights: mixed-precision training casts the fp32 masters in every step instead of
  // keeping their 16-bit copies as state (passes/weight_copies.h): less state, slower steps.
  bool recast_weights = false;
  // --recompute-elementwise: the backward computes cheap elementwise results (a GELU's erf and
  // exp) again instead of keeping them from the forward (passes/recompute_elementwise.h): less
  // memory, more arithmetic.
  bool recompute_elementwise = false;
  // Whether the caller chose autodiff or optimizer options (the CLI: any of --optimizer,
  // --lr, --momentum, --nesterov, --weight-decay, --betas, --eps, --loss, --freeze,
  // --accum-steps and the loss-scaling options). They
  // cannot apply to a model in training format, so that is an error.
  bool optimizer_options_given = false;
  // Fusion and target of the plan's steps (lower/lowering.h).
  lower::LoweringOptions lowering;
  // When set, receives the time and node count of every pass and later stage (--time-passes).
  StageTimes* stage_times = nullptr;
  // Verification after every pass (on by default in debug builds; --verify-each) and the
  // IR printed after the named passes (--print-after, --print-to).
  PassOptions passes;
  // When set (training), receives the compiled training step in ONNX's training format with
  // all initializer data (what `--emit-onnx` writes), exported before lowering.
  std::string* training_onnx = nullptr;
  // Receives each warning of the compile, one line without a prefix: what the file's model
  // computes as written but probably not as its author meant (lost_padding_rows.h). Unset:
  // written to stderr as "ampc: warning: LINE".
  std::function<void(const std::string&)> warn;
};

// Runs the passes over `model` (in place) and emits the plan. For training, the plan embeds
// the training step in ONNX's training format (Plan.training_model, see plan.proto).
// When `autocast_report` is given, it receives what autocast decided (empty for fp32).
plan::Plan compile_model(ir::Model& model, const CompileOptions& options,
                         const std::string& model_name,
                         passes::AutocastReport* autocast_report = nullptr);

// The names of compile_model's passes over the IR, in pipeline order (`--list-passes`); the
// names --print-after takes, with "all". A pass the options leave out does not run.
std::vector<std::string> pipeline_pass_names();

// The first part of compile_model, which makes the forward graph ready to differentiate:
// constants and shape arithmetic folded until every shape is static, Resize and the
// recurrent layers lowered to primitive ops (their projections cast back to fp32 after the
// MatMul when `low_precision` autocast follows), Gradient nodes expanded. A tool that
// differentiates a model itself (the zoo's gradient check) calls this first.
void prepare_forward(ir::Model& model, bool low_precision = false);

// Every node of a freshly imported model is forward; a model in ONNX's training format
// carries its parts in the names ampc's passes gave them (ir/phase.h).
void mark_imported_phases(ir::Model& model);

// The mixed-precision part of compile_model: autocast of the forward graph, then cast
// folding, CSE and dead-code elimination. The report lists only the Casts that survive.
passes::AutocastReport autocast_forward(ir::Model& model, const passes::AutocastOptions& options);

// What a precision report of an ONNX model shows (`ampc inspect --precision P
// --precision-report`, Python's ampc.precision_report): the forward prepared as compile_model
// prepares it (prepare_forward), then autocast_forward, so that the report's decisions are the
// plan's. Constant folding alone leaves some exports' shapes unknown (torchvision's
// VisionTransformer), and rules that need static shapes (a linear layer's bias) then differ.
passes::AutocastReport autocast_prepared(ir::Model& model, const passes::AutocastOptions& options);

// load_model with the import options `options` implies (training format when training).
std::unique_ptr<ir::Model> load_for_compile(const std::string& model_path,
                                            const CompileOptions& options);

// load_for_compile + compile_model.
plan::Plan compile_file(const std::string& model_path, const CompileOptions& options);

}  // namespace ampc::compiler
