#include "tools/ampc/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/number_format.h"
#include "ops/schemas/amp_schemas.h"
#include "runtime/data/batcher.h"
#include "runtime/io/checkpoint.h"
#include "runtime/plan/plan_file.h"
#include "tools/ampc/device_backend.h"
#include "tools/ampc/evaluate.h"
#include "tools/ampc/grad_stats_options.h"
#include "tools/ampc/interrupt.h"
#include "tools/ampc/nonfinite_diagnosis.h"
#include "tools/ampc/plan_inputs.h"
#include "tools/ampc/progress.h"
#include "tools/ampc/step_log.h"
#include "tools/ampc/step_outputs.h"
#include "tools/ampc/step_window.h"
#include "tools/ampc/train_sources.h"

namespace ampc::cli {
namespace {

// What the runs of one optimizer step give.
struct StepRun {
  std::vector<MicroBatch> runs;               // the step's batches (and states: --find-nonfinite)
  std::map<std::string, rt::Tensor> outputs;  // the last micro-batch's
  std::vector<double> loss_sums;              // each loss summed over the micro-batches
  double seconds = 0;                         // wall-clock time of the step
};

class Trainer {
 public:
  // Everything is checked here, before the first step: the plan, the data against the
  // plan's inputs, the checkpoint against its state, and that checkpoints can be written.
  Trainer(TrainArgs& args, DataParallelRun& dp);
  // The steps; on an interrupt (an InterruptGuard must live), ends the process after the
  // step (exit_interrupted).
  void train();
  // What rank 0 prints after training; the other ranks evaluate their share of the
  // held-out data.
  void report();

 private:
  void start_backend();
  void open_data_and_state();
  void prepare_steps();
  int64_t window_end(int64_t step) const;
  StepRun run_step(int64_t step);
  void diagnose_nonfinite(int64_t step, const StepRun& r, bool skipped, float loss);
  void log_step(int64_t step, const StepRun& r, float loss, bool skipped, double scale);
  void guard_consecutive_skips(int64_t step, const StepRun& r, bool skipped, float loss);
  bool checkpoint_if_due(int64_t step);
  void stop_if_interrupted(int64_t step, int agreed_signal, bool saved_now);

  TrainArgs& args_;
  DataParallelRun& dp_;
  // Diagnoses of an ONNX model run on its training step compiled without fusion (for one
  // rank, on the CPU: copied before the run's own world and target are set).
  TrainArgs unfused_args_;
  Device device_;
  std::vector<std::string> losses_;
  int64_t accum_ = 1;  // micro-batches per optimizer step, one run of the plan each
  AmpOutputs amp_;
  int64_t ahead_ = 1;  // optimizer steps run ahead of the host (step_window.h)
  std::unique_ptr<rt::Backend> backend_;
  std::unique_ptr<DiagnosisExecutor> diagnosis_;
  PlanInputs inputs_;
  std::unique_ptr<GradStats> grad_stats_;
  std::optional<rt::data::Dataset> eval_data_;
  std::unique_ptr<rt::data::Batcher> batcher_;
  rt::io::TrainingProgress progress_;
  float lr_ = 0;
  std::unique_ptr<StepLog> log_;
  int64_t first_ = 0, last_ = 0;
  int64_t step_samples_ = 0;  // the global batch of one optimizer step
  std::unique_ptr<Progress> bar_;
  std::chrono::steady_clock::time_point start_;
  int64_t skipped_steps_ = 0, consecutive_skips_ = 0;
  std::map<std::string, rt::Tensor> state_before_;  // --find-nonfinite: before a micro-batch
  std::unique_ptr<StepWindow> window_;
};

Trainer::Trainer(TrainArgs& args, DataParallelRun& dp) : args_(args), dp_(dp), unfused_args_(args) {
  unfused_args_.compile.lowering.fuse = false;
  unfused_args_.compile.warn = [](const std::string&) {};  // said by the first compile
  start_backend();
  open_data_and_state();
  prepare_steps();
}

// The training plan on its device, and what its outputs report.
void Trainer::start_backend() {
  args_.world = dp_.world();
  // Data parallel on GPUs: each rank its own, cuda:LOCAL_RANK, unless an index is given.
  device_ = parse_device(args_.device == "cuda" && dp_.world() > 1
                             ? "cuda:" + std::to_string(dp_.local_rank())
                             : args_.device);
  args_.target = compile_target(device_);  // a missing GPU is reported before compiling
  plan::Plan compiled = training_plan(args_);
  if (compiled.outputs_size() < 1) throw Error("the plan has no output to report as the loss");
  if (dp_.world() > 1 && !plan_reduces_gradients(compiled))
    throw Error("'" + args_.model +
                "' does not all-reduce its gradients: compile it with `ampc "
                "compile --train --data-parallel` to train it on " +
                std::to_string(dp_.world()) + " ranks");
  losses_ = loss_names(compiled);
  accum_ = accum_steps_of(compiled);
  amp_ = amp_outputs(compiled);
  // On a GPU the steps up to the next log line or checkpoint run ahead: the host waits for
  // the device once per window (step_window.h). The CPU and --find-nonfinite run one at a time.
  ahead_ = device_.cuda && !args_.find_nonfinite ? args_.log_every : 1;
  backend_ = make_backend(std::move(compiled), device_, std::min<int64_t>(ahead_ * accum_, 1024),
                          args_.model);
  if (device_.cuda && plan_reduces_gradients(backend_->plan())) dp_.start_gpu_communication();
  // A .plan keeps its own steps, as does a model compiled without fusion anyway.
  std::function<plan::Plan()> compile_unfused;
  if (!plan::looks_like_plan(args_.model) && args_.compile.lowering.fuse)
    compile_unfused = [this] { return training_plan(unfused_args_); };
  diagnosis_ = std::make_unique<DiagnosisExecutor>(*backend_, std::move(compile_unfused));
}

// The data against the plan's inputs, the batcher, and the state of --resume.
void Trainer::open_data_and_state() {
  const plan::Plan& p = backend_->plan();
  inputs_ = plan_inputs(p);
  dp_.check_same_plan(p, run_key(args_.data, args_.eval_data, args_.holdout, args_.shuffle,
                                 args_.seed, args_.steps, args_.resume));
  grad_stats_ = std::make_unique<GradStats>(p, args_.grad_stats);
  auto [train_data, eval_data] = open_data(args_);
  eval_data_ = std::move(eval_data);
  batcher_ = std::make_unique<rt::data::Batcher>(train_data, inputs_.specs,
                                                 rt::data::BatchOptions{.batch_size = inputs_.batch,
                                                                        .shuffle = args_.shuffle,
                                                                        .seed = args_.seed,
                                                                        .shard = dp_.rank(),
                                                                        .shards = dp_.world()});
  if (!args_.resume.empty()) {
    const auto ckpt = rt::io::read_checkpoint(args_.resume);
    try {
      backend_->load_state(ckpt.initializers);
    } catch (const Error& e) {
      throw Error("--resume " + args_.resume + " does not fit this plan: " + e.what());
    }
    progress_ = ckpt.progress;
    batcher_->set_position(progress_.data_position);
    std::cerr << "resumed from " << args_.resume << " after step " << progress_.step << '\n';
  }
  // Dropout masks follow the seed and the step, so a resumed run draws the same ones.
  backend_->set_random_state(args_.seed, progress_.step * accum_);
  if (!args_.checkpoint.empty()) rt::io::model_with_state(p, backend_->state());
  lr_ = compiled_lr(*backend_);
}

// The log, the progress bar and the window of steps run ahead.
void Trainer::prepare_steps() {
  log_ = std::make_unique<StepLog>(dp_.rank() == 0 ? args_.log_file : "");  // rank 0 logs
  first_ = progress_.step;
  last_ = progress_.step + args_.steps;
  step_samples_ = inputs_.batch * accum_ * dp_.world();
  bar_ = std::make_unique<Progress>(first_, last_, args_.log_every, step_samples_,
                                    ::isatty(STDERR_FILENO));
  start_ = std::chrono::steady_clock::now();
  window_ = std::make_unique<StepWindow>(
      *backend_, *batcher_, accum_, ahead_,
      [this](std::map<std::string, rt::Tensor>& feeds, int64_t step, int64_t k) {
        grad_stats_->feed(feeds, step, k == accum_ - 1);
        if (args_.find_nonfinite) state_before_ = backend_->state();
      });
}

// The last step of the window that starts at `step`: the next log line, checkpoint or end.
int64_t Trainer::window_end(int64_t step) const {
  auto next = [&](int64_t every) { return first_ + ((step - first_ - 1) / every + 1) * every; };
  int64_t end = std::min(last_, next(args_.log_every));
  if (args_.checkpoint_every > 0) end = std::min(end, next(args_.checkpoint_every));
  return end;
}

// The step's micro-batches: the plan decides on the last one whether to step; the log
// reports the mean of the micro-batches' losses (each the sum of the losses).
StepRun Trainer::run_step(int64_t step) {
  const auto t0 = std::chrono::steady_clock::now();
  dp_.set_phase("step " + std::to_string(step));
  StepRun r;
  r.loss_sums.assign(losses_.size(), 0.0);
  for (int64_t k = 0; k < accum_; ++k) {
    MicroBatch& run = r.runs.emplace_back();
    StepWindow::Run done = window_->next(step, k, window_end(step));
    run.batch = std::move(done.batch);
    if (args_.find_nonfinite) run.state_before = std::move(state_before_);
    r.outputs = std::move(done.outputs);
    for (size_t i = 0; i < losses_.size(); ++i)
      r.loss_sums[i] += scalar_of(r.outputs.at(losses_[i]));
  }
  r.seconds = ahead_ > 1
                  ? window_->step_seconds()
                  : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// --find-nonfinite: where a skipped step's (or a non-finite loss's) values first went bad.
void Trainer::diagnose_nonfinite(int64_t step, const StepRun& r, bool skipped, float loss) {
  if (!args_.find_nonfinite || !(skipped || !std::isfinite(loss))) return;
  bar_->finish();  // end the bar's line; it goes on below
  std::cerr << "step " << step << (skipped ? " skipped: " : ": ")
            << first_origin(diagnosis_->get(), r.runs, nullptr, args_.seed, step) << '\n';
}

void Trainer::log_step(int64_t step, const StepRun& r, float loss, bool skipped, double scale) {
  if (!log_->is_open()) return;
  StepRecord record{.step = step,
                    .loss = loss,
                    .lr = amp_.step_lr.empty() ? lr_ : scalar_of(r.outputs.at(amp_.step_lr)),
                    .scale = scale,
                    .skipped = skipped,
                    .grad_norm = std::nullopt,
                    .samples_per_s = r.seconds > 0 ? step_samples_ / r.seconds : 0.0,
                    .losses = {}};
  if (!amp_.grad_norm.empty()) record.grad_norm = scalar_of(r.outputs.at(amp_.grad_norm));
  if (losses_.size() > 1) {  // each loss (mean over the micro-batches); `loss` is their sum
    for (size_t i = 0; i < losses_.size(); ++i)
      record.losses.emplace_back(losses_[i], static_cast<float>(r.loss_sums[i]));
  }
  log_->write(record);
}

// Stops the run, with a diagnosis, after --max-consecutive-skips skipped steps in a row.
void Trainer::guard_consecutive_skips(int64_t step, const StepRun& r, bool skipped, float loss) {
  skipped_steps_ += skipped;
  consecutive_skips_ = skipped ? consecutive_skips_ + 1 : 0;
  if (args_.max_consecutive_skips <= 0 || consecutive_skips_ < args_.max_consecutive_skips) return;
  // Skipped steps left the parameters as they were, so running the step's batches again
  // from the current state shows where the values stop being finite.
  const auto now = backend_->state();
  std::string why = first_origin(diagnosis_->get(), r.runs, &now, args_.seed, step);
  for (size_t k; (k = why.find("\n  ")) != std::string::npos;)
    why.replace(k, 3, why[k - 1] == ':' ? " " : "; ");
  throw Error(consecutive_skips_message(*backend_, step, consecutive_skips_, loss) +
              ". Diagnosis (the last batch run again): " + why);
}

// Writes the checkpoint every --checkpoint-every steps and after the last; returns whether
// this is a --checkpoint-every step.
bool Trainer::checkpoint_if_due(int64_t step) {
  const bool save_now = args_.checkpoint_every > 0 && (step - first_) % args_.checkpoint_every == 0;
  if (!args_.checkpoint.empty() && dp_.rank() == 0 && (save_now || step == last_))
    rt::io::write_checkpoint(backend_->plan(), backend_->state(), progress_, args_.checkpoint);
  return save_now;
}

// After a SIGINT/SIGTERM: the checkpoint (unless just written), the message, the exit.
void Trainer::stop_if_interrupted(int64_t step, int agreed_signal, bool saved_now) {
  // On a GPU the state is read at the end of a window (the steps ahead are already queued).
  const int sig = dp_.world() > 1 ? agreed_signal : InterruptGuard::signal_received();
  if (sig == 0 || !(ahead_ == 1 || step == window_end(step))) return;
  bar_->finish();
  if (!args_.checkpoint.empty() && dp_.rank() == 0 && !saved_now && step != last_)
    rt::io::write_checkpoint(backend_->plan(), backend_->state(), progress_, args_.checkpoint);
  if (log_->is_open()) log_->close();
  std::cerr << interrupted_message(sig, step, last_, args_.checkpoint) << '\n';
  exit_interrupted(sig);
}

void Trainer::train() {
  for (int64_t step = first_ + 1; step <= last_; ++step) {
    StepRun r = run_step(step);
    grad_stats_->write(step, r.outputs);
    const bool skipped = !amp_.found_inf.empty() && r.outputs.at(amp_.found_inf).data<bool>()[0];
    // Several ranks: the losses averaged over them; an interrupt stops every rank at one step.
    const int signal =
        agree_on_step(dp_, step, r.loss_sums, skipped, InterruptGuard::signal_received());
    double loss_total = 0;
    for (double& l : r.loss_sums) loss_total += (l /= static_cast<double>(accum_));
    const auto loss = static_cast<float>(loss_total);
    // With the non-finite check compiled in, the plan has already skipped such a step.
    if (!std::isfinite(loss) && amp_.found_inf.empty())
      throw Error("step " + std::to_string(step) + ": the loss is " + format_number(loss));
    diagnose_nonfinite(step, r, skipped, loss);
    const double scale = amp_.scale.empty() ? 1.0 : scalar_of(r.outputs.at(amp_.scale));
    progress_ = {step, window_->position()};
    log_step(step, r, loss, skipped, scale);
    guard_consecutive_skips(step, r, skipped, loss);
    if (dp_.rank() == 0) bar_->step_done(step, loss);  // one progress for the run
    const bool saved_now = checkpoint_if_due(step);
    stop_if_interrupted(step, signal, saved_now);
  }
  bar_->finish();
}

void Trainer::report() {
  const plan::Plan& p = backend_->plan();
  if (args_.dp.check_replicas) {
    const int64_t n = dp_.check_same_state(backend_->state());
    if (dp_.rank() == 0)
      std::printf("replicas: %lld states identical on %d ranks\n", static_cast<long long>(n),
                  dp_.world());
  }
  if (dp_.rank() != 0) {  // rank 0 reports; the others evaluate their share of the held-out data
    if (eval_data_) evaluate(p, backend_->state(), losses_[0], *eval_data_, &dp_);
    return;
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::printf("trained %lld steps in %.2f s (%.0f samples/s)\n",
              static_cast<long long>(args_.steps), wall,
              static_cast<double>(args_.steps * step_samples_) / wall);
  if (!amp_.found_inf.empty()) {
    std::printf("loss scaling: %lld of %lld steps skipped (non-finite gradients)",
                static_cast<long long>(skipped_steps_), static_cast<long long>(args_.steps));
    if (const auto s = current_scale(*backend_)) std::printf(", final scale %g", *s);
    std::printf("\n");
  }
  if (const std::string d = device_summary(*backend_); !d.empty())
    std::printf("device: %s\n", d.c_str());
  if (const std::string c = dp_.comm_summary(args_.steps); !c.empty())
    std::printf("data parallel: %s\n", c.c_str());
  if (!args_.checkpoint.empty()) std::printf("checkpoint: %s\n", args_.checkpoint.c_str());
  if (eval_data_) {  // held-out evaluation reports the first loss
    std::printf("held-out: %s\n",
                describe(evaluate(p, backend_->state(), losses_[0], *eval_data_, &dp_)).c_str());
  }
}

}  // namespace

void run_train(TrainArgs& args, DataParallelRun& dp) {
  // A model in training format (a checkpoint, --emit-onnx) may hold the loss scaler's ops.
  ops::register_amp_schemas();
  check_train_args(args);
  Trainer trainer(args, dp);
  // SIGINT/SIGTERM from here on finish the step, write the checkpoint and exit (interrupt.h).
  InterruptGuard interrupt_guard;
  trainer.train();
  trainer.report();
}

}  // namespace ampc::cli
