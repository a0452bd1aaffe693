// The training options `ampc compile --train` and `ampc train` share.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "driver/pipeline.h"

namespace ampc::cli {

struct TrainingOptions {
  std::string betas;                    // "B1,B2"
  std::vector<std::string> lr_mult;     // --lr-mult PATTERN=F
  std::string precision = "fp32";       // --precision fp32|fp16|bf16
  std::string batchnorm_running_var;    // --batchnorm-running-var unbiased|biased
  double min_scale = 0, max_scale = 0;  // --min-scale / --max-scale when given
  const CLI::App* command = nullptr;    // set by add_training_options: what was given
};

void add_training_options(CLI::App* cmd, compiler::CompileOptions& options, TrainingOptions& extra);
// Applies what CLI11 could not parse directly (--betas) and sets
// options.optimizer_options_given when any option of add_training_options was given.
// The options of add_training_options that were given on the command line (they shape the
// compiled step, so a plan that is already compiled cannot take them).
std::vector<std::string> compile_options_given(const TrainingOptions& extra);
// Those of them that only a training step uses (optimizer, losses, loss scaling, gradient
// accumulation), as opposed to the precision options a forward plan takes too.
std::vector<std::string> training_step_options_given(const TrainingOptions& extra);
void finish_training_options(compiler::CompileOptions& options, const TrainingOptions& extra);

}  // namespace ampc::cli
