// The Python API's trainer: a training plan on an executor, run one optimizer step per
// call, with the command line's pieces (tools/ampc/step_outputs.h, plan_inputs.h,
// evaluate.h, runtime/io/checkpoint.h) so that a step computes what `ampc train` computes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "python/src/tensor_view.h"
#include "runtime/backend.h"
#include "runtime/plan/plan.pb.h"
#include "tools/ampc/evaluate.h"
#include "tools/ampc/plan_inputs.h"
#include "tools/ampc/step_outputs.h"

namespace ampc::python {

// What `ampc.compile` passes on: the options of `ampc compile --train` that it has, each
// set only when the caller gave it (a plan, or a model in ONNX's training format, refuses
// training options, as the command line does).
struct TrainOptions {
  std::string precision = "fp32";
  std::optional<std::string> optimizer;
  std::optional<double> lr, momentum, weight_decay, eps, init_scale, clip_grad_norm;
  std::optional<std::pair<double, double>> betas;
  std::optional<std::string> loss_scale;  // dynamic | static:S | none
  // The loss scaler's dynamics and the non-finite check (`--growth-factor`, ...).
  std::optional<double> growth_factor, backoff_factor, min_scale, max_scale;
  std::optional<int64_t> growth_interval;
  bool skip_nonfinite = false;
  bool nesterov = false;
  // The lr schedule and the parameter groups (`--lr-schedule`, ..., `--no-decay`,
  // `--lr-mult PATTERN=F`).
  std::optional<std::string> lr_schedule;
  std::optional<int64_t> warmup_steps, total_steps, step_size;
  std::optional<double> warmup_start_factor, gamma, min_lr_factor;
  std::vector<std::string> no_decay;
  std::vector<std::pair<std::string, double>> lr_mult;
  std::optional<int64_t> accum_steps;
  std::vector<std::string> freeze, losses, input_shapes;
  bool log_grad_norm = false;
  // Autocast's overrides and weight copies (`ampc compile --allow/--deny/--follow/--keep-fp32/
  // --policy/--recast-weights`).
  std::vector<std::string> allow, deny, follow, keep_fp32;
  std::string policy;
  bool recast_weights = false;
  bool recompute_elementwise = false;  // `ampc compile --recompute-elementwise`
  // `ampc compile --batchnorm-running-var`: "unbiased" or "biased"; unset, the model decides.
  std::optional<std::string> batchnorm_running_var;
  bool fusion = true;
  std::string target = "cpu";
  // Where the plan runs: "cpu", "cuda" or "cuda:N" (an ONNX model is then compiled for that
  // GPU unless `target` names one, as `ampc train --device` does).
  std::string device = "cpu";
  // The names (as the Python keywords) of the options the caller gave.
  std::vector<std::string> given;
};

// A training plan: a .plan file (from `ampc compile --train`), or an ONNX model compiled for
// training on options.device with `options`. Throws ampc::Error as `ampc train` does. The
// compile's warnings (CompileOptions::warn) go to `warnings`.
plan::Plan training_plan(const std::string& path, const TrainOptions& options,
                         std::vector<std::string>& warnings);

struct StepResult {
  double loss = 0;  // the sum of the losses, mean over the micro-batches (the CLI's log)
  std::optional<double> scale, grad_norm;
  bool skipped = false;
  double lr = 0;  // the lr the step used (NaN when the plan has none)
  int64_t step = 0;
  std::map<std::string, double> losses;  // each loss, when there are several
};

class Trainer {
 public:
  // The plan runs on `device` (cpu, cuda, cuda:N) with the command line's backend.
  Trainer(plan::Plan plan, std::string model, uint64_t seed, const std::string& device = "cpu");

  // Each plan input with the shape one step() takes: the plan's own shape, or with gradient
  // accumulation the micro-batches of an optimizer step stacked on the first axis
  // (accum_steps x batch), which every input must then share.
  std::map<std::string, std::pair<DType, std::vector<int64_t>>> step_inputs() const;
  int64_t accum_steps() const { return accum_; }
  // The first axis the inputs share (samples per micro-batch); 0 when they share none (a
  // sequence-first [T, B, F] input beside [B] labels, a scalar input).
  int64_t batch() const { return batch_; }
  const std::vector<std::string>& losses() const { return losses_; }
  int64_t steps_done() const { return steps_done_; }

  // Checks every input (names, element types, shapes: the caller's error names the input)
  // before anything runs, then runs the optimizer step's micro-batches. Thread-safe; called
  // without the GIL.
  StepResult step(const std::map<std::string, BorrowedArray>& feeds);

  // The addresses step() last read each input from (to show it read the caller's memory).
  const std::map<std::string, uintptr_t>& last_input_addresses() const { return addresses_; }

  std::map<std::string, rt::Tensor> state() const;
  // Names of the model's state (parameters and buffers, the main graph's initializers), as
  // opposed to the optimizer's and the loss scaler's.
  const std::vector<std::string>& model_state_names() const { return model_state_; }
  // Replaces the values named in `values` (the others keep theirs); all or nothing.
  void update_state(const std::map<std::string, rt::Tensor>& values);

  // The CLI's checkpoint: the plan's training model with the state, the step count and
  // `data_position` (the batches fed so far, unless given).
  void save(const std::string& path, std::optional<int64_t> data_position) const;
  // Loads a checkpoint's state and step count (`ampc train --resume`).
  void load_checkpoint(const std::string& path);
  // The plan as compiled (as `ampc compile -o` writes it).
  void save_plan(const std::string& path) const;

  // Held-out loss and accuracy over `data`, as `ampc train --eval` computes them.
  cli::EvalResult evaluate(const rt::data::Dataset& data) const;

 private:
  plan::Plan compiled_;  // before the loss scaler's outputs were exposed
  std::string model_;
  uint64_t seed_;
  std::unique_ptr<rt::Backend> backend_;
  std::map<std::string, std::pair<DType, std::vector<int64_t>>> types_;  // the plan's inputs
  cli::PlanInputs inputs_;  // with accumulation: the per-sample shapes and the batch
  int64_t batch_ = 0;
  cli::AmpOutputs amp_;
  std::vector<std::string> losses_;
  std::vector<std::string> model_state_;
  int64_t accum_ = 1;
  float lr_ = 0;
  int64_t steps_done_ = 0;
  std::map<std::string, uintptr_t> addresses_;
  mutable std::mutex mutex_;
};

}  // namespace ampc::python
