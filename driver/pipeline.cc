#include "driver/pipeline.h"

#include <filesystem>
#include <iostream>
#include <set>

#include "base/error.h"
#include "driver/pass_manager.h"
#include "driver/training_build.h"
#include "driver/training_signature.h"
#include "frontend/onnx/export.h"
#include "frontend/onnx/export_training.h"
#include "ir/phase.h"
#include "ir/verifier.h"
#include "lower/plan_emit.h"
#include "lower/plan_memory.h"
#include "passes/accumulating_index_put.h"
#include "passes/autodiff/gradient_op.h"
#include "passes/boolean_mask_selection.h"
#include "passes/broadcast_expands.h"
#include "passes/cast_cleanup.h"
#include "passes/circular_pad_export.h"
#include "passes/common_subexpression.h"
#include "passes/constant_folding.h"
#include "passes/dead_code_elimination.h"
#include "passes/expand_norm_params.h"
#include "passes/half_inputs.h"
#include "passes/idle_dropouts.h"
#include "passes/index_ops_for_cuda.h"
#include "passes/inline_constant_if.h"
#include "passes/integer_ops_for_cuda.h"
#include "passes/linear_as_gemm.h"
#include "passes/lost_padding_rows.h"
#include "passes/lower_einsum.h"
#include "passes/lower_grid_sample.h"
#include "passes/lower_resize.h"
#include "passes/range_stats.h"
#include "passes/recompute_casts.h"
#include "passes/recompute_elementwise.h"
#include "passes/recurrent_lowering.h"
#include "passes/reductions_for_cuda.h"
#include "passes/scalar_powers.h"
#include "passes/stable_log_sigmoid.h"
#include "passes/static_shapes.h"
#include "passes/summed_matmuls.h"
#include "passes/summed_pads.h"
#include "passes/transpose_chains.h"
#include "passes/transpose_to_gemm.h"
#include "passes/weight_copies.h"
#include "passes/widened_loss_scores.h"
#include "passes/widened_row_grads.h"
#include "report/plan_precision.h"
#include "report/precision_decisions.h"

namespace ampc::compiler {
namespace {

std::string shape_spec(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  return s;
}

// The training step in ONNX's training format without the data of the STATE buffers (their
// initial values are in the plan already).
std::string training_model_bytes(const ir::Model& model) {
  onnx::ModelProto proto = onnx_io::export_training_model(model);
  std::set<std::string> state;
  for (const auto& u : model.state_updates) state.insert(u.target->name);
  onnx_io::drop_initializer_data(proto, state);
  return onnx_io::serialize_model(proto);
}

}  // namespace

void mark_imported_phases(ir::Model& model) {
  if (model.state_updates.empty())
    ir::set_phase(*model.graph, ir::Phase::kForward);
  else  // a model in ONNX's training format brings its own step
    ir::set_phases_from_exported_names(*model.graph);
}

namespace {

// Standalone runs of a part of the pipeline (prepare_forward, autocast_forward) check no more
// than any import guarantees.
constexpr ir::VerifyOptions kPartVerify{.require_static_inputs = false};

void warn(const CompileOptions& options, const std::string& line) {
  if (options.warn)
    options.warn(line);
  else
    std::cerr << "ampc: warning: " << line << '\n';
}

// Constants first: gradient rules need constant shapes, axes and slice bounds; folding shape
// arithmetic to a fixed point makes every shape static (static_shapes.h).
// Shapes folded to a fixed point, and each If whose condition then folds replaced by its
// branch (inline_constant_if.h), the shapes after it inferred again.
void fold_shapes_and_constant_ifs(ir::Model& m) {
  passes::fold_static_shapes(m);
  while (passes::inline_constant_ifs(m) > 0) passes::fold_static_shapes(m);
}

void add_forward_preparation(std::vector<Pass>& out, bool low_precision) {
  out.push_back({"fold-static-shapes", fold_shapes_and_constant_ifs});
  // Dropouts that drop nothing (ratio 0, inference mode) bypassed, once their ratio and mode
  // are constants (idle_dropouts.h).
  out.push_back({"remove-idle-dropouts", [](ir::Model& m) { passes::remove_idle_dropouts(m); }});
  // torch 1.13's wrong circular padding, refused before anything computes it (its Slices'
  // bounds are constants from here on).
  out.push_back({"refuse-misexported-circular-pad",
                 [](ir::Model& m) { passes::refuse_misexported_circular_pad(m); }});
  // x[mask] in a loss computed in place, with static shapes (boolean_mask_selection.h).
  out.push_back(
      {"boolean-masks-in-place", [](ir::Model& m) { passes::compute_boolean_masks_in_place(m); }});
  // torch's export of index_put_(accumulate=True), x + ScatterND(zeros, ...) without a
  // reduction, summing repeated indices as PyTorch does (accumulating_index_put.h); after the
  // masks, whose positions never repeat.
  out.push_back({"accumulate-index-puts", [](ir::Model& m) { passes::accumulate_index_puts(m); }});
  // torch's log(sigmoid(x)) and log(1 - sigmoid(x)) (BCEWithLogitsLoss, LogSigmoid) as
  // softplus, finite where sigmoid rounds to 0 or 1 (stable_log_sigmoid.h).
  out.push_back({"stable-log-sigmoid", [](ir::Model& m) { passes::stable_log_sigmoid(m); }});
  // Einsum as Transpose / Reshape / MatMul (lower_einsum.h); the shapes after each one it
  // lowers are inferred again, which readies an Einsum reading another's output, and an If
  // whose condition reads an Einsum's shape (torch's .diagonal() of one) folds then.
  out.push_back({"lower-einsum", [](ir::Model& m) {
                   while (passes::lower_einsum(m) > 0) fold_shapes_and_constant_ifs(m);
                 }});
  // Interpolation as MatMuls (lower_resize.h).
  out.push_back({"lower-resize", [](ir::Model& m) { passes::lower_resize(m); }});
  // GridSample as gathers and weights (lower_grid_sample.h).
  out.push_back({"lower-grid-sample", [](ir::Model& m) { passes::lower_grid_sample(m); }});
  // LayerNormalization's broadcast scale and bias made full-shape (expand_norm_params.h).
  out.push_back({"expand-norm-params", [](ir::Model& m) { passes::expand_norm_params(m); }});
  // ai.onnx.preview.training Gradient nodes become the gradient graph they stand for.
  out.push_back({"expand-gradient-ops", [](ir::Model& m) {
                   if (passes::expand_gradient_ops(m) > 0) passes::fold_constants(m);
                 }});
  // LSTM, GRU, RNN as primitive per-time-step ops (passes/recurrent_lowering.h).
  out.push_back({"lower-recurrent", [low_precision](ir::Model& m) {
                   passes::lower_recurrent_layers(m, {.cast_projections = low_precision});
                 }});
}

// Autocast of the forward graph into `report`, then (mixed precision) cast folding, CSE and
// dead-code elimination; the report then lists only the Casts that survive.
void add_autocast(std::vector<Pass>& out, const passes::AutocastOptions& options,
                  passes::AutocastReport& report) {
  out.push_back({"autocast", [&options, &report](ir::Model& m) {
                   report = passes::apply_autocast(m, options);
                 }});
  // torch's linear on 3-D inputs rounds once: its MatMul + Add as one Gemm (linear_as_gemm.h).
  out.push_back(
      {"linear-as-gemm", [&report](ir::Model& m) { passes::linear_layers_as_gemm(m, &report); },
       std::nullopt, [&options] { return options.precision != passes::Precision::kFP32; }});
  // The cross-entropy's fp32 scores, cast from the 16-bit logits, read widened by the loss
  // itself (widened_loss_scores.h): no fp32 copy of the logits.
  out.push_back({"widened-loss-scores",
                 [&report](ir::Model& m) { passes::read_loss_scores_widened(m, &report); },
                 std::nullopt,
                 [&options] { return options.precision != passes::Precision::kFP32; }});
  out.push_back({"cast-cleanup",
                 [&report](ir::Model& m) {
                   passes::cleanup_casts(m);
                   passes::eliminate_common_subexpressions(m);
                   passes::eliminate_dead_code(m);
                   std::set<std::string> live;
                   for (const auto& n : m.graph->nodes) live.insert(n->name);
                   std::erase_if(report.casts, [&](const auto& c) { return !live.count(c.node); });
                 },
                 std::nullopt,
                 [&options] { return options.precision != passes::Precision::kFP32; }});
}

}  // namespace

passes::AutocastReport autocast_forward(ir::Model& model, const passes::AutocastOptions& options) {
  passes::AutocastReport report;
  std::vector<Pass> part;
  add_autocast(part, options, report);
  PassManager(std::move(part), {}, kPartVerify).run(model);
  return report;
}

void prepare_forward(ir::Model& model, bool low_precision) {
  std::vector<Pass> part;
  add_forward_preparation(part, low_precision);
  PassManager(std::move(part), {}, kPartVerify).run(model);
}

passes::AutocastReport autocast_prepared(ir::Model& model, const passes::AutocastOptions& options) {
  prepare_forward(model, options.precision != passes::Precision::kFP32);
  return autocast_forward(model, options);
}

namespace {

// The losses a training plan minimises, as chosen (--loss); empty: the first output.
std::vector<std::string> chosen_losses(const passes::AutodiffOptions& ad) {
  std::vector<std::string> losses = ad.losses;
  if (losses.empty() && !ad.loss.empty()) losses.push_back(ad.loss);
  return losses;
}

// The options a plan records (Plan.options): input shapes, precision, the chosen losses.
lower::EmitOptions emit_options(const CompileOptions& options, const std::string& model_name) {
  lower::EmitOptions emit;
  emit.model_name = model_name;
  for (const auto& [name, dims] : options.import.input_shapes)
    emit.recorded_options["input-shape." + name] = shape_spec(dims);
  if (options.autocast.precision != passes::Precision::kFP32)
    emit.recorded_options["precision"] = passes::precision_name(options.autocast.precision);
  if (options.train) {
    std::string losses;
    bool separable = true;  // a name with a comma is not recorded (the signature has it)
    for (const auto& name : chosen_losses(options.autodiff)) {
      losses += (losses.empty() ? "" : ",") + name;
      separable &= name.find(',') == std::string::npos;
    }
    if (!losses.empty() && separable) emit.recorded_options[kLossesOption] = losses;
  }
  return emit;
}

// What the pipeline's passes hand each other and compile_model.
struct PipelineState {
  passes::AutocastReport autocast;
  TrainingBuild build;
  std::string training_model;  // the embedded training step (Plan.training_model)
  size_t graph_outputs = 0;    // before the trainer's outputs were added
  bool training = false;       // the step was built here or imported
};

// Every pass over the IR, in order: forward preparation, autocast, the training step and
// cleanup (the graph the plan is made of), then the training step's export and what the plan
// adds after it. Passes that the options leave out are in the list, disabled.
std::vector<Pass> pipeline_passes(const CompileOptions& o, PipelineState& s) {
  const bool mixed = o.autocast.precision != passes::Precision::kFP32;
  const bool mixed_training = mixed && o.train;
  std::vector<Pass> out;
  out.push_back({"mark-phases", mark_imported_phases});
  add_forward_preparation(out, mixed);
  // nn.Embedding's padding_idx that torch's export drops, said before the step trains the row
  // (lost_padding_rows.h); the tables are still the file's initializers here.
  out.push_back({"warn-lost-padding-rows",
                 [&o](ir::Model& m) {
                   for (const std::string& line : passes::lost_padding_row_warnings(m, o.autodiff))
                     warn(o, line);
                 },
                 std::nullopt, [&o] { return o.train; }});
  // Mixed precision on the forward graph, before differentiation (amp-semantics.md 2).
  out.push_back({"half-inputs",
                 [&o, mixed](ir::Model& m) {
                   if (!mixed) throw Error("--half-inputs needs --precision fp16 or bf16");
                   passes::halve_float_inputs(m, o.autocast.precision == passes::Precision::kBF16
                                                     ? DType::kBFloat16
                                                     : DType::kFloat16);
                 },
                 std::nullopt, [&o] { return o.half_inputs; }});
  add_autocast(out, o.autocast, s.autocast);
  add_training_passes(out, o, s.build);
  // The backward of a Cast is a Cast back: fold the pairs it makes, merge duplicates.
  out.push_back({"training-cast-cleanup",
                 [](ir::Model& m) {
                   passes::cleanup_casts(m);
                   passes::eliminate_common_subexpressions(m);
                 },
                 ir::Phase::kUnknown, [mixed_training] { return mixed_training; }});
  // The 16-bit gradient that autocast's Cast after a LayerNorm or Softmax hands back, read
  // widened by the row op's backward: no float32 copy (widened_row_grads.h).
  out.push_back({"widened-row-grads", [](ir::Model& m) { passes::read_row_grads_widened(m); },
                 ir::Phase::kUnknown, [mixed_training] { return mixed_training; }});
  // Powers by constant exponents as PyTorch computes them (products, reciprocals, square
  // roots: scalar_powers.h), the backward's included; every plan.
  out.push_back({"scalar-powers", [](ir::Model& m) { passes::expand_scalar_powers(m); },
                 ir::Phase::kUnknown});
  // A weight gradient summed over many thin products (an unrolled RNN's, one a time step)
  // computed as one product of the stacked operands (summed_matmuls.h); every plan.
  out.push_back({"stack-summed-matmuls", [](ir::Model& m) { passes::stack_summed_matmuls(m); },
                 ir::Phase::kUnknown});
  // The padded gradients of slices that tile an axis, summed, as one Concat (summed_pads.h);
  // every plan.
  out.push_back({"concat-summed-pads", [](ir::Model& m) { passes::concat_summed_pads(m); },
                 ir::Phase::kUnknown});
  // A transpose separated from its GEMM by a scalar op (MultiheadAttention's q scaling, and
  // its gradient) moved to the GEMM's side, where the view folds it. CPU plans only, as the next.
  out.push_back({"move-transposes-to-gemms",
                 [](ir::Model& m) { passes::move_transposes_to_gemms(m); }, ir::Phase::kUnknown,
                 [&o] { return o.lowering.target == "cpu"; }});
  // Autodiff transposes operands the forward transposed: one transpose from the stored tensor,
  // which a CPU plan's MatMul reads as a strided view. Not for CUDA plans: there the outer
  // transpose of such a chain is mostly a swap of the last two axes that cuBLASLt takes as a
  // flag, and the composed one would be a copy.
  out.push_back({"compose-transposes", [](ir::Model& m) { passes::compose_transposes(m); },
                 ir::Phase::kUnknown, [&o] { return o.lowering.target == "cpu"; }});
  // ArgMax, ArgMin, ReduceLogSumExp and CumSum (forward and gradient) as reductions,
  // comparisons and shifts, which the CUDA backend runs (reductions_for_cuda.h).
  const auto cuda = [&o] { return o.lowering.target.rfind("cuda", 0) == 0; };
  out.push_back({"reductions-for-cuda", [](ir::Model& m) { passes::reductions_for_cuda(m); },
                 ir::Phase::kUnknown, cuda});
  // Integer Clip, Max, Min, Neg, Abs and Mod (index and position arithmetic) as the integer
  // ops the CUDA backend has (integer_ops_for_cuda.h).
  out.push_back({"integer-ops-for-cuda", [](ir::Model& m) { passes::integer_ops_for_cuda(m); },
                 ir::Phase::kUnknown, cuda});
  // GatherElements, ScatterElements, GatherND, OneHot, Trilu and Tile (forward and gradient) as
  // Gather, ScatterND, Where and Expand, which the CUDA backend runs (index_ops_for_cuda.h).
  out.push_back({"index-ops-for-cuda", [](ir::Model& m) { passes::index_ops_for_cuda(m); },
                 ir::Phase::kUnknown, cuda});
  // Expands read by ops that broadcast by themselves (a reduction's gradient, summed into the
  // input's): those ops read the small tensor (broadcast_expands.h); every plan, after the
  // passes above, which write Expands too.
  out.push_back({"expands-as-broadcasts",
                 [](ir::Model& m) { passes::read_expands_as_broadcasts(m); }, ir::Phase::kUnknown});
  out.push_back({"eliminate-dead-code", [](ir::Model& m) { passes::eliminate_dead_code(m); },
                 ir::Phase::kUnknown});
  out.push_back({"verify", [&o](ir::Model& m) {
                   ir::verify(m, {.require_static_inputs = o.import.require_static_inputs});
                 }});
  // The steps that cleanup, statistics and lowering add take their neighbours' phase.
  out.push_back({"fill-phases", [](ir::Model& m) { ir::fill_unknown_phases(*m.graph); }});
  // The training step as ONNX, before lowering folds GEMM epilogues (which are not ONNX).
  out.push_back({"export-training-model",
                 [&o, &s](ir::Model& m) {
                   s.training_model = training_model_bytes(m);
                   if (o.training_onnx)
                     *o.training_onnx = onnx_io::serialize_model(onnx_io::export_training_model(m));
                 },
                 std::nullopt, [&o] { return o.train; }});
  // After the export, so that the embedded training step (checkpoints, held-out evaluation)
  // keeps its own outputs: range statistics (--grad-stats) and what the trainer logs.
  out.push_back({"range-stats",
                 [&s](ir::Model& m) { passes::add_range_stats(m, s.build.range_stats); },
                 ir::Phase::kStatistics, [&s] { return !s.build.range_stats.empty(); }});
  // The trainer's outputs are graph outputs while the plan is made (lowering keeps them,
  // the memory plan plans them as outputs), and no longer afterwards: the graph compile_model
  // leaves exports as the training step, as the embedded one.
  out.push_back({"trainer-outputs",
                 [&s](ir::Model& m) {
                   s.graph_outputs = m.graph->outputs.size();
                   s.training = !m.state_updates.empty();
                   if (s.training) add_trainer_outputs(m);
                 },
                 ir::Phase::kUnknown});
  // Speed: the optimizer writes each parameter's 16-bit copy, which the next step reads
  // instead of casting the fp32 master again (weight_copies.h).
  out.push_back({"keep-weight-copies", [](ir::Model& m) { passes::keep_weight_copies(m); },
                 ir::Phase::kOptimizer,
                 [mixed_training, &o] { return mixed_training && !o.recast_weights; }});
  // Memory: fp16 copies the backward reads again are cast again there, not kept.
  out.push_back({"recompute-casts",
                 [](ir::Model& m) {
                   passes::recompute_casts(m);
                   ir::fill_unknown_phases(*m.graph);
                 },
                 ir::Phase::kUnknown, [mixed_training] { return mixed_training; }});
  // Memory: autocast's fp32 chains over a 16-bit activation (torch's GELU) are computed again
  // in the backward from the 16-bit source, which the backward keeps instead of their results.
  out.push_back({"recompute-low-chains",
                 [](ir::Model& m) {
                   passes::recompute_low_chains(m);
                   ir::fill_unknown_phases(*m.graph);
                 },
                 ir::Phase::kUnknown, [mixed_training] { return mixed_training; }});
  // Memory (--recompute-elementwise): cheap elementwise results the backward reads again are
  // computed again there from values it keeps anyway (a GELU's erf and exp), not kept.
  out.push_back({"recompute-elementwise",
                 [](ir::Model& m) {
                   passes::recompute_elementwise(m);
                   ir::fill_unknown_phases(*m.graph);
                 },
                 ir::Phase::kUnknown, [&o] { return o.train && o.recompute_elementwise; }});
  return out;
}

// Lowering (GEMM epilogues and fused kernels, or one step per node), then the plan.
// Autocast's decisions are recorded in each emitted plan (report/precision_decisions.h).
plan::Plan lower_and_emit(ir::Model& model, const CompileOptions& options, lower::EmitOptions& emit,
                          const passes::AutocastReport& autocast) {
  StageTimes* times = options.stage_times;
  auto emit_with_decisions = [&] {
    plan::Plan p = lower::emit_plan(model, emit);
    report::record_precision_decisions(*model.graph, autocast, p);
    return p;
  };
  if (!options.lowering.fuse) {
    StageTimer stage(times, "plan emission");
    plan::Plan p = emit_with_decisions();
    stage.finish(p.steps_size());
    return p;
  }
  // The precision report names ONNX nodes: it is made from the graph lowered one step per
  // node, before anything is folded or fused, and stored in the plan.
  StageTimer stage(times, "precision report");
  const plan::Plan unfused = emit_with_decisions();
  stage.finish(unfused.steps_size());
  stage = StageTimer(times, "fusion + epilogues");
  lower::Lowering lowering = lower::lower_graph(model, options.lowering);
  stage.finish(static_cast<int64_t>(lowering.steps.size()));
  stage = StageTimer(times, "kernel codegen (PTX)");
  lower::attach_ptx(lowering, options.lowering.target);
  stage.finish(static_cast<int64_t>(lowering.kernels.size()));
  stage = StageTimer(times, "plan emission");
  emit.lowering = &lowering;
  plan::Plan p = emit_with_decisions();
  p.set_precision_report(report::lowered_precision_report(unfused, p));
  stage.finish(p.steps_size());
  return p;
}

}  // namespace

plan::Plan compile_model(ir::Model& model, const CompileOptions& options,
                         const std::string& model_name, passes::AutocastReport* autocast_report) {
  PipelineState s;
  PassManager(pipeline_passes(options, s), options.passes,
              {.require_static_inputs = options.import.require_static_inputs}, options.stage_times)
      .run(model);

  lower::EmitOptions emit = emit_options(options, model_name);
  if (s.training)
    emit.training = training_signature(model, chosen_losses(options.autodiff), options.accum_steps);
  if (!s.build.running_variance.empty())
    emit.recorded_options[kRunningVarianceOption] = s.build.running_variance;
  plan::Plan p = lower_and_emit(model, options, emit, s.autocast);
  // Autocast's decisions, recorded in the plan, go to the caller too when asked for.
  if (autocast_report) *autocast_report = std::move(s.autocast);
  model.graph->outputs.resize(s.graph_outputs);
  p.set_target(options.lowering.target);
  StageTimer stage(options.stage_times, "memory plan");
  lower::plan_memory(p);
  stage.finish(p.steps_size());
  if (options.train) p.set_training_model(std::move(s.training_model));
  return p;
}

std::vector<std::string> pipeline_pass_names() {
  const CompileOptions defaults;
  PipelineState unused;
  std::vector<std::string> names;
  for (const Pass& p : pipeline_passes(defaults, unused)) names.push_back(p.name);
  return names;
}

std::unique_ptr<ir::Model> load_for_compile(const std::string& model_path,
                                            const CompileOptions& options) {
  onnx_io::ImportOptions import = options.import;
  import.training = options.train;
  return onnx_io::load_model(model_path, import);
}

plan::Plan compile_file(const std::string& model_path, const CompileOptions& options) {
  auto model = load_for_compile(model_path, options);
  return compile_model(*model, options, std::filesystem::path(model_path).stem().string());
}

}  // namespace ampc::compiler
