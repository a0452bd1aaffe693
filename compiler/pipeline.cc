#include "compiler/pipeline.h"

#include <filesystem>
#include <set>

#include "base/error.h"
#include "compiler/ir/phase.h"
#include "compiler/ir/verifier.h"
#include "compiler/onnx/export.h"
#include "compiler/onnx/export_training.h"
#include "compiler/plan_emit.h"
#include "compiler/plan_memory.h"
#include "compiler/report/plan_precision.h"
#include "compiler/training_signature.h"
#include "passes/autodiff/gradient_op.h"
#include "passes/cast_cleanup.h"
#include "passes/common_subexpression.h"
#include "passes/constant_folding.h"
#include "passes/data_parallel.h"
#include "passes/dead_code_elimination.h"
#include "passes/grad_accumulation.h"
#include "passes/grad_clipping.h"
#include "passes/half_inputs.h"
#include "passes/loss_log_prob.h"
#include "passes/lower_resize.h"
#include "passes/range_stats.h"
#include "passes/recompute_casts.h"
#include "passes/recurrent_lowering.h"
#include "passes/running_statistics.h"
#include "passes/static_shapes.h"
#include "passes/sync_batch_norm.h"

namespace ampc::compiler {
namespace {

std::string shape_spec(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  return s;
}

// Backward graph, optimizer step, running statistics as state; or, for a model that came
// in ONNX's training format, its own training step. Returns the tensors whose range
// statistics were asked for (options.range_stats), added after the export.
std::vector<passes::RangeStatsTarget> add_training_step(ir::Model& model,
                                                        const CompileOptions& options) {
  if (!model.state_updates.empty()) {
    if (options.range_stats.any())
      throw Error(
          "range statistics (--grad-stats) need a forward model, not one in ONNX's "
          "training format");
    if (options.data_parallel.sync_batchnorm)
      throw Error(
          "--sync-batchnorm cannot change a model that already holds its training step (ONNX "
          "training format)");
    if (options.optimizer_options_given) {
      throw Error(
          "the model already holds its training step (ONNX training format): "
          "--optimizer, --lr, --momentum, --nesterov, --weight-decay, --betas, --eps, "
          "--loss, --freeze, --accum-steps and the loss-scaling options cannot change it");
    }
    return {};
  }
  // --sync-batchnorm: BatchNorm's statistics over every rank, before differentiation so that
  // autodiff builds their backward (passes/sync_batch_norm.h).
  std::vector<ir::Model::StateUpdate> synced_statistics;
  if (options.data_parallel.sync_batchnorm) {
    if (!options.data_parallel.enabled)
      throw Error(
          "--sync-batchnorm needs data parallel: `ampc train` under mpirun, or `ampc compile "
          "--train --data-parallel`");
    passes::synchronize_batch_norm(model, synced_statistics);
  }
  const size_t forward_nodes = model.graph->nodes.size();
  // Each part of the step marks the nodes it adds with its phase (Node::phase, Step's
  // source_phases), which reports show; the name prefixes the passes give are only names.
  ir::Graph& g = *model.graph;
  // Loss scaling around the backward (amp-semantics.md section 3): seed it with the scale,
  // unscale and check, clip, skip the optimizer's updates on found_inf, update the scale.
  // With gradient accumulation the seed is scale / N, the gradients are summed over the N
  // micro-batches, and the optimizer and the scale update apply on the last one only.
  passes::LossScaleOptions scaling_options = options.loss_scale;
  scaling_options.precision = options.autocast.precision;  // picks the default mode
  const passes::LossScaleConfig scaling = passes::resolve_loss_scale(scaling_options);
  g.build_phase = ir::Phase::kLossScaling;
  const passes::LossScaleState scale = passes::add_loss_scale_state(model, scaling);
  const passes::AccumulationState accum =
      passes::add_accumulation_state(model, options.accum_steps, scale.scale);
  g.build_phase = ir::Phase::kForward;
  passes::keep_loss_log_prob(model);
  g.build_phase = ir::Phase::kBackward;
  auto gradients = passes::differentiate(model, options.autodiff, accum.seed);
  g.build_phase = ir::Phase::kLossScaling;
  passes::accumulate_gradients(model, gradients, accum);
  g.build_phase = ir::Phase::kBackward;
  passes::reduce_gradients(model, gradients, options.data_parallel);  // mean over the ranks
  g.build_phase = ir::Phase::kLossScaling;
  ir::Value* found_inf = passes::unscale_and_check(model, scale, gradients, scaling);
  auto stats = passes::stats_targets(model, forward_nodes, gradients, options.range_stats);
  passes::clip_gradients(model, gradients, scaling.options.clip_grad_norm,
                         scaling.options.log_grad_norm);
  ir::Value* skip = passes::skip_predicate(model, found_inf, accum);
  g.build_phase = ir::Phase::kOptimizer;
  passes::add_optimizer(model, gradients, options.optimizer, skip, accum.last_micro);
  g.build_phase = ir::Phase::kLossScaling;
  passes::add_scale_update(model, scale, found_inf, scaling, accum.last_micro);
  g.build_phase = ir::Phase::kForward;
  passes::add_running_statistics_updates(model);
  model.state_updates.insert(model.state_updates.end(), synced_statistics.begin(),
                             synced_statistics.end());
  // The counter's update first: the folder leaves alone only what reads a state that has an
  // update, and it folds integer comparisons (micro_step == N - 1 would fold to false).
  g.build_phase = ir::Phase::kLossScaling;
  passes::add_micro_step_update(model, accum);
  // Later passes' nodes take their phase from their neighbours (ir/phase.h).
  g.build_phase = ir::Phase::kUnknown;
  passes::fold_constants(model);
  return stats;
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

int64_t node_count(const ir::Model& model) {
  return static_cast<int64_t>(model.graph->nodes.size());
}

}  // namespace

void mark_imported_phases(ir::Model& model) {
  if (model.state_updates.empty())
    ir::set_phase(*model.graph, ir::Phase::kForward);
  else  // a model in ONNX's training format brings its own step
    ir::set_phases_from_exported_names(*model.graph);
}

passes::AutocastReport autocast_forward(ir::Model& model, const passes::AutocastOptions& options) {
  passes::AutocastReport report = passes::apply_autocast(model, options);
  if (options.precision == passes::Precision::kFP32) return report;
  passes::cleanup_casts(model);
  passes::eliminate_common_subexpressions(model);
  passes::eliminate_dead_code(model);
  std::set<std::string> live;
  for (const auto& n : model.graph->nodes) live.insert(n->name);
  std::erase_if(report.casts, [&](const auto& c) { return !live.count(c.node); });
  return report;
}

void prepare_forward(ir::Model& model, bool low_precision) {
  // Constants first: gradient rules need constant shapes, axes and slice bounds; folding
  // shape arithmetic to a fixed point makes every shape static (static_shapes.h).
  passes::fold_static_shapes(model);
  passes::lower_resize(model);  // interpolation as MatMuls (lower_resize.h)
  // ai.onnx.preview.training Gradient nodes become the gradient graph they stand for.
  if (passes::expand_gradient_ops(model) > 0) passes::fold_constants(model);
  // LSTM, GRU, RNN as primitive per-time-step ops (passes/recurrent_lowering.h).
  passes::lower_recurrent_layers(model, {.cast_projections = low_precision});
}

namespace {

// The losses a training plan minimises, as chosen (--loss); empty: the first output.
std::vector<std::string> chosen_losses(const passes::AutodiffOptions& ad) {
  std::vector<std::string> losses = ad.losses;
  if (losses.empty() && !ad.loss.empty()) losses.push_back(ad.loss);
  return losses;
}

// The options a plan records (Plan.options): input shapes, precision, the chosen losses.
EmitOptions emit_options(const CompileOptions& options, const std::string& model_name) {
  EmitOptions emit;
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

// Forward preparation, autocast, the training step and cleanup: the graph the plan is made of.
std::vector<passes::RangeStatsTarget> build_step(ir::Model& model, const CompileOptions& options,
                                                 passes::AutocastReport& autocast) {
  StageTimes* times = options.stage_times;
  mark_imported_phases(model);
  StageTimer stage(times, "constant folding");
  const bool mixed = options.autocast.precision != passes::Precision::kFP32;
  prepare_forward(model, mixed);

  // Mixed precision on the forward graph, before differentiation (amp-semantics.md 2).
  stage.finish(node_count(model));
  stage = StageTimer(times, "autocast");
  if (options.half_inputs) {
    if (!mixed) throw Error("--half-inputs needs --precision fp16 or bf16");
    passes::halve_float_inputs(model, options.autocast.precision == passes::Precision::kBF16
                                          ? DType::kBFloat16
                                          : DType::kFloat16);
  }
  autocast = autocast_forward(model, options.autocast);

  stage.finish(node_count(model));
  stage = StageTimer(times, "training build");
  std::vector<passes::RangeStatsTarget> range_stats;
  if (options.train) range_stats = add_training_step(model, options);
  model.graph->build_phase = ir::Phase::kUnknown;
  // The backward of a Cast is a Cast back: fold the pairs it makes, merge duplicates.
  if (mixed && options.train) {
    passes::cleanup_casts(model);
    passes::eliminate_common_subexpressions(model);
  }
  stage.finish(node_count(model));

  stage = StageTimer(times, "cleanup + verify");
  passes::eliminate_dead_code(model);
  ir::verify(model, {.require_static_inputs = options.import.require_static_inputs});
  stage.finish(node_count(model));
  return range_stats;
}

// Lowering (GEMM epilogues and fused kernels, or one step per node), then the plan.
plan::Plan lower_and_emit(ir::Model& model, const CompileOptions& options, EmitOptions& emit) {
  StageTimes* times = options.stage_times;
  if (!options.lowering.fuse) {
    StageTimer stage(times, "plan emission");
    plan::Plan p = emit_plan(model, emit);
    stage.finish(p.steps_size());
    return p;
  }
  // The precision report names ONNX nodes: it is made from the graph lowered one step per
  // node, before anything is folded or fused, and stored in the plan.
  StageTimer stage(times, "precision report");
  const plan::Plan unfused = emit_plan(model, emit);
  stage.finish(unfused.steps_size());
  stage = StageTimer(times, "fusion + epilogues");
  lower::Lowering lowering = lower::lower_graph(model, options.lowering);
  stage.finish(static_cast<int64_t>(lowering.steps.size()));
  stage = StageTimer(times, "kernel codegen (PTX)");
  lower::attach_ptx(lowering, options.lowering.target);
  stage.finish(static_cast<int64_t>(lowering.kernels.size()));
  stage = StageTimer(times, "plan emission");
  emit.lowering = &lowering;
  plan::Plan p = emit_plan(model, emit);
  p.set_precision_report(report::lowered_precision_report(unfused, p));
  stage.finish(p.steps_size());
  return p;
}

}  // namespace

plan::Plan compile_model(ir::Model& model, const CompileOptions& options,
                         const std::string& model_name, passes::AutocastReport* autocast_report) {
  StageTimes* times = options.stage_times;
  passes::AutocastReport autocast;
  const std::vector<passes::RangeStatsTarget> range_stats = build_step(model, options, autocast);
  // The steps that cleanup, statistics and lowering add take their neighbours' phase.
  ir::fill_unknown_phases(*model.graph);

  // The training step as ONNX, before lowering folds GEMM epilogues (which are not ONNX).
  StageTimer stage(times, "training model export");
  std::string training_model;
  if (options.train) {
    training_model = training_model_bytes(model);
    if (options.training_onnx)
      *options.training_onnx = onnx_io::serialize_model(onnx_io::export_training_model(model));
  }
  stage.finish(node_count(model));
  // After the export, so that the embedded training step (checkpoints, held-out evaluation)
  // keeps its own outputs: range statistics (--grad-stats) and what the trainer logs.
  model.graph->build_phase = ir::Phase::kStatistics;
  passes::add_range_stats(model, range_stats);
  model.graph->build_phase = ir::Phase::kUnknown;
  // The trainer's outputs are graph outputs while the plan is made (lowering keeps them,
  // the memory plan plans them as outputs), and no longer afterwards: the graph compile_model
  // leaves exports as the training step, as the embedded one.
  const size_t graph_outputs = model.graph->outputs.size();
  const bool training = !model.state_updates.empty();  // built here or imported
  if (training) add_trainer_outputs(model);

  EmitOptions emit = emit_options(options, model_name);
  // Autocast's decisions, recorded in the plan (moved into *autocast_report when given).
  if (autocast_report) *autocast_report = std::move(autocast);
  emit.autocast = autocast_report ? autocast_report : &autocast;

  // Memory: fp16 copies the backward reads again are cast again there, not kept.
  if (options.autocast.precision != passes::Precision::kFP32 && options.train) {
    stage = StageTimer(times, "recompute casts");
    passes::recompute_casts(model);
    ir::fill_unknown_phases(*model.graph);
    stage.finish(node_count(model));
  }

  if (training)
    emit.training = training_signature(model, chosen_losses(options.autodiff), options.accum_steps);
  plan::Plan p = lower_and_emit(model, options, emit);
  model.graph->outputs.resize(graph_outputs);
  p.set_target(options.lowering.target);
  stage = StageTimer(times, "memory plan");
  plan_memory(p);
  stage.finish(p.steps_size());
  if (options.train) p.set_training_model(std::move(training_model));
  return p;
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
