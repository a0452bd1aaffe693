#include "driver/training_build.h"

#include "base/error.h"
#include "passes/autodiff/autodiff.h"
#include "passes/buffer_updates.h"
#include "passes/constant_folding.h"
#include "passes/data_parallel.h"
#include "passes/grad_clipping.h"
#include "passes/loss_log_prob.h"
#include "passes/optimizer.h"
#include "passes/running_statistics.h"
#include "passes/sync_batch_norm.h"

namespace ampc::compiler {
namespace {

// A model in ONNX's training format holds its own step: the options that would shape one
// cannot apply to it, so they are errors rather than ignored.
void check_imported_step(const CompileOptions& options) {
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
}

}  // namespace

void add_training_passes(std::vector<Pass>& out, const CompileOptions& options, TrainingBuild& b) {
  const CompileOptions& o = options;
  using ir::Phase;
  auto builds = [&o, &b] { return o.train && !b.imported; };
  // Each training pass: runs when the step is built here, marks its nodes with `phase`.
  auto add = [&](std::string name, Phase phase, std::function<void(ir::Model&)> run) {
    out.push_back({std::move(name), std::move(run), phase, builds});
  };
  out.push_back({"check-imported-step",
                 [&o, &b](ir::Model& m) {
                   b.imported = !m.state_updates.empty();
                   if (b.imported) check_imported_step(o);
                 },
                 std::nullopt, [&o] { return o.train; }});
  // --sync-batchnorm: BatchNorm's statistics over every rank, before differentiation so that
  // autodiff builds their backward (passes/sync_batch_norm.h).
  out.push_back({"sync-batchnorm",
                 [&o, &b](ir::Model& m) {
                   if (!o.data_parallel.enabled)
                     throw Error(
                         "--sync-batchnorm needs data parallel: `ampc train` under mpirun, "
                         "or `ampc compile --train --data-parallel`");
                   passes::synchronize_batch_norm(m, b.synced_statistics);
                 },
                 std::nullopt,
                 [&o, builds] { return builds() && o.data_parallel.sync_batchnorm; }});
  // Buffers the forward writes (listed by ampc.export) become state before autodiff looks
  // for the loss among the outputs (passes/buffer_updates.h).
  add("buffer-updates", Phase::kForward, [](ir::Model& m) { passes::add_buffer_updates(m); });
  // Loss scaling around the backward (amp-semantics.md section 3): seed it with the scale,
  // unscale and check, clip, skip the optimizer's updates on found_inf, update the scale.
  // With gradient accumulation the seed is scale / N, the gradients are summed over the N
  // micro-batches, and the optimizer and the scale update apply on the last one only.
  add("loss-scale-state", Phase::kLossScaling, [&o, &b](ir::Model& m) {
    b.forward_nodes = m.graph->nodes.size();
    passes::LossScaleOptions scaling_options = o.loss_scale;
    scaling_options.precision = o.autocast.precision;  // picks the default mode
    b.scaling = passes::resolve_loss_scale(scaling_options);
    b.scale = passes::add_loss_scale_state(m, b.scaling);
  });
  add("accumulation-state", Phase::kLossScaling, [&o, &b](ir::Model& m) {
    b.accum = passes::add_accumulation_state(m, o.accum_steps, b.scale.scale);
  });
  add("keep-loss-log-prob", Phase::kForward, [](ir::Model& m) { passes::keep_loss_log_prob(m); });
  add("autodiff", Phase::kBackward,
      [&o, &b](ir::Model& m) { b.gradients = passes::differentiate(m, o.autodiff, b.accum.seed); });
  add("accumulate-gradients", Phase::kLossScaling,
      [&b](ir::Model& m) { passes::accumulate_gradients(m, b.gradients, b.accum); });
  add("all-reduce-gradients", Phase::kBackward,  // the mean over the ranks
      [&o, &b](ir::Model& m) { passes::reduce_gradients(m, b.gradients, o.data_parallel); });
  // The statistics' targets are chosen here, among the unscaled gradients, before clipping.
  add("unscale-check", Phase::kLossScaling, [&o, &b](ir::Model& m) {
    b.found_inf = passes::unscale_and_check(m, b.scale, b.gradients, b.scaling);
    b.range_stats = passes::stats_targets(m, b.forward_nodes, b.gradients, o.range_stats);
  });
  add("clip-gradients", Phase::kLossScaling, [&b](ir::Model& m) {
    passes::clip_gradients(m, b.gradients, b.scaling.options.clip_grad_norm,
                           b.scaling.options.log_grad_norm);
  });
  add("skip-predicate", Phase::kLossScaling,
      [&b](ir::Model& m) { b.skip = passes::skip_predicate(m, b.found_inf, b.accum); });
  add("optimizer", Phase::kOptimizer, [&o, &b](ir::Model& m) {
    passes::add_optimizer(m, b.gradients, o.optimizer, b.skip, b.accum.last_micro);
  });
  add("scale-update", Phase::kLossScaling, [&b](ir::Model& m) {
    passes::add_scale_update(m, b.scale, b.found_inf, b.scaling, b.accum.last_micro);
  });
  add("running-statistics", Phase::kForward, [&o, &b](ir::Model& m) {
    const bool unbiased = o.unbiased_running_variance.value_or(m.producer_name == "pytorch");
    if (passes::has_running_variance(m)) b.running_variance = unbiased ? "unbiased" : "biased";
    passes::add_running_statistics_updates(m, {.unbiased_variance = unbiased});
    m.state_updates.insert(m.state_updates.end(), b.synced_statistics.begin(),
                           b.synced_statistics.end());
  });
  // The counter's update first: the folder leaves alone only what reads a state that has an
  // update, and it folds integer comparisons (micro_step == N - 1 would fold to false).
  add("micro-step-update", Phase::kLossScaling,
      [&b](ir::Model& m) { passes::add_micro_step_update(m, b.accum); });
  // Later passes' nodes take their phase from their neighbours (ir/phase.h).
  add("fold-step-constants", Phase::kUnknown, [](ir::Model& m) { passes::fold_constants(m); });
}

}  // namespace ampc::compiler
