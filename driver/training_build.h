// The training step's build as named passes (backward graph, loss scaling, gradient
// accumulation and reduction, optimizer step, state updates), each carrying the phase it
// builds (Node::phase); or, for a model that came in ONNX's training format, the check that
// no option asks to change the step it holds.
#pragma once

#include <vector>

#include "driver/pass_manager.h"
#include "driver/pipeline.h"
#include "passes/grad_accumulation.h"
#include "passes/loss_scaling.h"
#include "passes/range_stats.h"

namespace ampc::compiler {

// What the training passes hand each other, in pipeline order.
struct TrainingBuild {
  bool imported = false;  // the model holds its training step already: nothing is built
  std::vector<ir::Model::StateUpdate> synced_statistics;  // --sync-batchnorm
  // The running-variance update the step makes ("unbiased", "biased"; empty: no BatchNorm
  // running variance), recorded in the plan (kRunningVarianceOption).
  std::string running_variance;
  size_t forward_nodes = 0;  // before the step's first node
  passes::LossScaleConfig scaling;
  passes::LossScaleState scale;
  passes::AccumulationState accum;
  std::vector<passes::ParameterGradient> gradients;
  ir::Value* found_inf = nullptr;
  ir::Value* skip = nullptr;
  // The tensors whose range statistics were asked for (options.range_stats), added after the
  // training step's export.
  std::vector<passes::RangeStatsTarget> range_stats;
};

// Appends the training passes (enabled when options.train) to `out`; they read and write
// `build`, which must outlive running them.
void add_training_passes(std::vector<Pass>& out, const CompileOptions& options,
                         TrainingBuild& build);

}  // namespace ampc::compiler
