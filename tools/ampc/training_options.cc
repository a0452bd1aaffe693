#include "tools/ampc/training_options.h"

#include <cstdio>
#include <cstdlib>
#include <span>

#include "base/error.h"

namespace ampc::cli {
namespace {

// Every option add_training_options defines: they describe the training step ampc builds,
// so none may be given for a model that brings its own (ONNX training format).
const char* const kTrainingOptionNames[] = {"--loss",
                                            "--freeze",
                                            "--optimizer",
                                            "--lr",
                                            "--momentum",
                                            "--nesterov",
                                            "--weight-decay",
                                            "--betas",
                                            "--eps",
                                            "--accum-steps",
                                            "--batchnorm-running-var"};
// The lr schedule and the parameter groups (passes/lr_schedule.h, passes/optimizer.h).
const char* const kScheduleOptionNames[] = {
    "--lr-schedule",   "--warmup-steps", "--warmup-start-factor",
    "--total-steps",   "--step-size",    "--gamma",
    "--min-lr-factor", "--no-decay",     "--lr-mult"};
// The loss scaler's options (passes/loss_scaling.h), part of the same training step.
const char* const kLossScaleOptionNames[] = {
    "--loss-scale", "--init-scale", "--growth-factor",  "--backoff-factor", "--growth-interval",
    "--min-scale",  "--max-scale",  "--skip-nonfinite", "--clip-grad-norm", "--log-grad-norm"};

// Autocast's options, which also shape the compiled step.
const char* const kPrecisionOptionNames[] = {"--precision",   "--allow",         "--deny",
                                             "--follow",      "--keep-fp32",     "--policy",
                                             "--half-inputs", "--recast-weights"};

}  // namespace

std::vector<std::string> compile_options_given(const TrainingOptions& extra) {
  std::vector<std::string> given;
  if (!extra.command) return given;
  using Names = std::span<const char* const>;
  for (Names names :
       {Names(kTrainingOptionNames), Names(kScheduleOptionNames), Names(kLossScaleOptionNames)}) {
    for (const char* name : names)
      if (extra.command->count(name)) given.push_back(name);
  }
  for (const char* name : kPrecisionOptionNames)
    if (extra.command->count(name)) given.push_back(name);
  return given;
}

std::vector<std::string> training_step_options_given(const TrainingOptions& extra) {
  std::vector<std::string> given;
  if (!extra.command) return given;
  using Names = std::span<const char* const>;
  for (Names names : {Names(kTrainingOptionNames), Names(kLossScaleOptionNames)}) {
    for (const char* name : names)
      if (extra.command->count(name)) given.push_back(name);
  }
  return given;
}

void add_training_options(CLI::App* cmd, compiler::CompileOptions& o, TrainingOptions& extra) {
  extra.command = cmd;
  cmd->add_option("--loss", o.autodiff.losses,
                  "The graph output to minimise (default: the only output); repeatable: the "
                  "sum of several losses");
  cmd->add_option("--accum-steps", o.accum_steps,
                  "Gradient accumulation: one optimizer step per N micro-batches (default 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--freeze", o.autodiff.freeze,
                  "Initializers not to train (glob pattern, repeatable): every float "
                  "initializer the loss reads is trained otherwise, torch.nn buffers and "
                  "requires_grad=False parameters included");
  cmd->add_option("--batchnorm-running-var", extra.batchnorm_running_var,
                  "unbiased | biased: BatchNorm's running variance blends in the batch's "
                  "unbiased variance (PyTorch's nn.BatchNorm) or its biased one (ONNX's "
                  "operator); default: unbiased for a model PyTorch exported, biased otherwise")
      ->check(CLI::IsMember({"unbiased", "biased"}));
  cmd->add_option("--optimizer", o.optimizer.kind, "sgd | adam | adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  cmd->add_option("--lr", o.optimizer.lr, "Learning rate");
  cmd->add_option("--momentum", o.optimizer.momentum, "SGD momentum");
  cmd->add_flag("--nesterov", o.optimizer.nesterov, "SGD Nesterov momentum");
  cmd->add_option("--weight-decay", o.optimizer.weight_decay, "Weight decay");
  cmd->add_option("--betas", extra.betas, "Adam betas B1,B2");
  cmd->add_option("--eps", o.optimizer.eps, "Adam epsilon");
  auto& sched = o.optimizer.schedule;
  cmd->add_option("--lr-schedule", sched.kind,
                  "constant | step | cosine | linear: the lr after the warm-up, computed in the "
                  "plan from the optimizer step (default constant)");
  cmd->add_option("--warmup-steps", sched.warmup_steps,
                  "Linear warm-up over this many optimizer steps (default 0)");
  cmd->add_option("--warmup-start-factor", sched.warmup_start_factor,
                  "The lr factor the warm-up starts from (default 0.01)");
  cmd->add_option("--total-steps", sched.total_steps,
                  "Cosine and linear decay: the step where the lr reaches --min-lr-factor");
  cmd->add_option("--step-size", sched.step_size, "Step decay: every this many steps");
  cmd->add_option("--gamma", sched.gamma, "Step decay: the factor (default 0.1)");
  cmd->add_option("--min-lr-factor", sched.min_lr_factor,
                  "Cosine and linear decay: the final lr as a factor of --lr (default 0)");
  cmd->add_option("--no-decay", o.optimizer.no_decay,
                  "Parameters without weight decay: name glob pattern (repeatable)");
  cmd->add_option("--lr-mult", extra.lr_mult,
                  "PATTERN=F: the lr times F for parameters matching the glob (repeatable; the "
                  "first match applies)");
  auto& ls = o.loss_scale;
  cmd->add_option("--loss-scale", ls.mode,
                  "dynamic | static:S | none (default: dynamic for fp16, none for bf16 and fp32)");
  cmd->add_option("--init-scale", ls.init_scale, "Initial dynamic loss scale (default 65536)");
  cmd->add_option("--growth-factor", ls.growth_factor,
                  "Scale factor after --growth-interval steps without overflow (default 2)");
  cmd->add_option("--backoff-factor", ls.backoff_factor,
                  "Scale factor after a step with non-finite gradients (default 0.5)");
  cmd->add_option("--growth-interval", ls.growth_interval,
                  "Steps without overflow before the scale grows (default 2000)");
  cmd->add_option("--min-scale", extra.min_scale, "Lower bound of the dynamic loss scale");
  cmd->add_option("--max-scale", extra.max_scale, "Upper bound of the dynamic loss scale");
  cmd->add_flag("--skip-nonfinite", ls.skip_nonfinite,
                "Skip steps with non-finite gradients even without loss scaling");
  cmd->add_option("--clip-grad-norm", ls.clip_grad_norm,
                  "Clip the gradients' global 2-norm to this value (after unscaling)");
  cmd->add_flag("--log-grad-norm", ls.log_grad_norm,
                "Compute the gradients' global norm every step (the log's grad_norm)");
  // Mixed precision (autocast of the forward graph): also for a forward plan without
  // --train, so these are not in kTrainingOptionNames.
  auto& ac = o.autocast;
  // Checked by passes::parse_precision (an ampc error naming the value).
  cmd->add_option("--precision", extra.precision, "fp32 | fp16 | bf16 (default fp32)");
  cmd->add_option("--allow", ac.allow, "Op type to compute in the low precision (repeatable)");
  cmd->add_option("--deny", ac.deny, "Op type to compute in fp32 (repeatable)");
  cmd->add_option("--follow", ac.follow,
                  "Op type to compute in the dtype of its inputs (repeatable)");
  cmd->add_option("--keep-fp32", ac.keep_fp32,
                  "Nodes to compute in fp32: node-name glob pattern (repeatable)");
  cmd->add_flag("--half-inputs", o.half_inputs,
                "Float data inputs in the low precision: batches are rounded when prepared, the "
                "step reads half the input bytes (needs --precision fp16|bf16)");
  cmd->add_flag("--recast-weights", o.recast_weights,
                "Cast the fp32 parameters to fp16/bf16 in every step instead of keeping copies "
                "the optimizer writes: 2 bytes less state per parameter, slower steps");
  cmd->add_flag("--recompute-elementwise", o.recompute_elementwise,
                "Compute elementwise results the backward reads (a GELU's erf and exp) again "
                "there instead of keeping them from the forward: less memory, more arithmetic");
  cmd->add_option("--policy", ac.policy_file,
                  "JSON file of precision overrides: {\"allow\": [...], \"deny\": [...], "
                  "\"follow\": [...], \"keep_fp32\": [...]}");
}

void finish_training_options(compiler::CompileOptions& o, const TrainingOptions& extra) {
  o.autocast.precision = passes::parse_precision(extra.precision);
  if (!extra.batchnorm_running_var.empty())
    o.unbiased_running_variance = extra.batchnorm_running_var == "unbiased";
  if (extra.command) {
    for (const char* name : kTrainingOptionNames)
      o.optimizer_options_given |= extra.command->count(name) > 0;
    for (const char* name : kScheduleOptionNames)
      o.optimizer_options_given |= extra.command->count(name) > 0;
    for (const char* name : kLossScaleOptionNames)
      o.optimizer_options_given |= extra.command->count(name) > 0;
    if (extra.command->count("--min-scale")) o.loss_scale.min_scale = extra.min_scale;
    if (extra.command->count("--max-scale")) o.loss_scale.max_scale = extra.max_scale;
  }
  for (const std::string& spec : extra.lr_mult) {
    const auto eq = spec.rfind('=');
    char* end = nullptr;
    const double factor = eq == std::string::npos ? 0 : std::strtod(spec.c_str() + eq + 1, &end);
    if (eq == std::string::npos || eq == 0 || end == spec.c_str() + eq + 1 || *end != '\0')
      throw Error("--lr-mult '" + spec + "': expected PATTERN=F (for example '*.bias=2')");
    o.optimizer.lr_mult.emplace_back(spec.substr(0, eq), factor);
  }
  if (extra.betas.empty()) return;
  if (std::sscanf(extra.betas.c_str(), "%lf,%lf", &o.optimizer.beta1, &o.optimizer.beta2) != 2) {
    throw Error("--betas '" + extra.betas + "': expected B1,B2 (for example 0.9,0.999)");
  }
}

}  // namespace ampc::cli
