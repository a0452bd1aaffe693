// `ampc train MODEL.onnx|MODEL.plan --data DATA --steps N`: the training loop on the CPU.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/number_format.h"
#include "compiler/pipeline.h"
#include "passes/amp_schemas.h"
#include "passes/grad_accumulation.h"
#include "passes/loss_scaling.h"
#include "passes/lr_schedule.h"
#include "runtime/cpu/executor.h"
#include "runtime/cpu/nonfinite_search.h"
#include "runtime/data/batcher.h"
#include "runtime/dist/collectives.h"
#include "runtime/io/checkpoint.h"
#include "runtime/plan/plan_file.h"
#include "tools/ampc/commands.h"
#include "tools/ampc/data_parallel.h"
#include "tools/ampc/device_backend.h"
#include "tools/ampc/evaluate.h"
#include "tools/ampc/grad_stats_options.h"
#include "tools/ampc/interrupt.h"
#include "tools/ampc/plan_inputs.h"
#include "tools/ampc/progress.h"
#include "tools/ampc/step_outputs.h"
#include "tools/ampc/step_window.h"
#include "tools/ampc/training_options.h"

namespace ampc::cli {
namespace {

struct TrainArgs {
  std::string model;
  std::string data;
  int64_t steps = 100;
  bool shuffle = false;
  uint64_t seed = 0;
  std::string log_file;
  int64_t log_every = 10;
  std::string eval_data;
  double holdout = 0;
  std::string checkpoint;
  int64_t checkpoint_every = 0;
  std::string resume;
  int64_t max_consecutive_skips = 50;
  bool find_nonfinite = false;
  std::vector<std::string> input_shapes;
  std::string device = "cpu";  // --device cpu|cuda[:N]
  std::string target = "cpu";  // what an ONNX model is compiled for (the device's)
  GradStatsArgs grad_stats;    // --grad-stats, --grad-stats-every, --activation-stats
  compiler::CompileOptions compile;
  TrainingOptions training;
  DataParallelArgs dp;  // --reduce-dtype, --bucket-kib, --comm-timeout (data_parallel.h)
  int world = 1;        // ranks of the run (mpirun -np N)
};

plan::Plan training_plan(TrainArgs& args) {
  if (plan::looks_like_plan(args.model)) {
    auto given = compile_options_given(args.training);
    if (!args.input_shapes.empty()) given.push_back("--input-shape");
    for (const auto& name : args.dp.compile_options_given) given.push_back(name);
    if (args.dp.sync_batchnorm) given.push_back("--sync-batchnorm");
    if (!given.empty()) {
      std::string names;
      for (const auto& n : given) names += (names.empty() ? "" : ", ") + n;
      throw Error(names + ": '" + args.model +
                  "' is compiled already, so these cannot change it; give them to `ampc "
                  "compile`, or train the ONNX model");
    }
    plan::Plan p = plan::load_plan(args.model);
    if (p.state_updates_size() == 0) {
      throw Error("'" + args.model + "' is a forward plan; compile it with `ampc compile --train`");
    }
    return p;
  }
  auto& o = args.compile;
  o.train = true;
  for (const auto& spec : args.input_shapes) onnx_io::parse_input_shape(spec, o.import);
  finish_training_options(o, args.training);
  o.range_stats = args.grad_stats.compile_options();
  o.lowering.target = args.target;  // the device's: no PTX for the CPU
  set_data_parallel_options(args.dp, args.world, o);
  return compiler::compile_file(args.model, o);
}

// The training data and the held-out data (--eval DATA, or the last --holdout share of
// --data; none when neither is given).
std::pair<rt::data::Dataset, std::optional<rt::data::Dataset>> open_data(const TrainArgs& args) {
  rt::data::Dataset data = rt::data::Dataset::open(args.data);
  if (!args.eval_data.empty()) return {data, rt::data::Dataset::open(args.eval_data)};
  if (args.holdout <= 0) return {data, std::nullopt};
  const auto held = static_cast<int64_t>(std::llround(args.holdout * data.samples()));
  if (held < 1 || held >= data.samples()) {
    throw Error("--holdout " + std::to_string(args.holdout) + " of " +
                std::to_string(data.samples()) + " samples leaves no training or no held-out data");
  }
  auto [train, eval] = rt::data::split(data, data.samples() - held);
  return {train, eval};
}

// The training guard: too many skipped steps in a row means the model produces non-finite
// values that scaling cannot cure (a NaN in the forward, a diverged parameter...).
std::string consecutive_skips_message(const rt::Backend& executor, int64_t step, int64_t skips,
                                      float loss) {
  char buf[64];
  std::string m = std::to_string(skips) + " consecutive steps skipped (steps " +
                  std::to_string(step - skips + 1) + " to " + std::to_string(step) +
                  "): their gradients were not finite";
  if (const auto s = current_scale(executor)) {
    std::snprintf(buf, sizeof buf, "%g", *s);
    m += "; the loss scale is now " + std::string(buf);
  }
  if (!std::isfinite(loss)) {
    const char* what = std::isnan(loss) ? "nan" : (loss > 0 ? "inf" : "-inf");
    m += std::string("; the loss itself is ") + what +
         ", so the forward pass already produces non-finite values (check the data and the "
         "learning rate)";
  }
  return m +
         ". Stopping instead of training on; raise --max-consecutive-skips (0: no limit) "
         "to go on regardless";
}

// Runs `batch` again from `state` (with the random stream of run `run`, counted from 0) with
// a check after every plan step and says where the first non-finite value came from, or
// nothing when none appears; leaves the executor as it found it (state, and the random
// stream set to `runs_done`).
std::optional<std::string> find_origin(rt::cpu::Executor& executor,
                                       const std::map<std::string, rt::Tensor>& state,
                                       const std::map<std::string, rt::Tensor>& batch,
                                       uint64_t seed, int64_t run, int64_t runs_done) {
  const auto now = executor.state();
  const rt::dist::RankLocal local;  // data parallel: this rank's batch alone
  executor.load_state(state);
  executor.set_random_state(seed, run);
  const auto origin = rt::cpu::find_nonfinite_origin(executor, batch);
  executor.load_state(now);
  executor.set_random_state(seed, runs_done);
  if (!origin) return std::nullopt;
  return rt::cpu::describe(*origin);
}

constexpr const char* kTransient =
    "no non-finite value when the step runs again (a transient overflow)";

// One plan run of an optimizer step: its batch, and the state before it (--find-nonfinite).
struct MicroBatch {
  std::map<std::string, rt::Tensor> state_before, batch;
};

// find_origin over the micro-batches of optimizer step `step`, in order, each from its own
// state or from `state` when given; the first origin found, naming the micro-batch when
// there are several.
std::string first_origin(rt::cpu::Executor& executor, const std::vector<MicroBatch>& runs,
                         const std::map<std::string, rt::Tensor>* state, uint64_t seed,
                         int64_t step) {
  const auto n = static_cast<int64_t>(runs.size());
  for (int64_t k = 0; k < n; ++k) {
    const MicroBatch& r = runs[static_cast<size_t>(k)];
    const auto origin = find_origin(executor, state ? *state : r.state_before, r.batch, seed,
                                    (step - 1) * n + k, step * n);
    if (!origin) continue;
    if (n == 1) return *origin;
    return "micro-batch " + std::to_string(k + 1) + " of " + std::to_string(n) + ": " + *origin;
  }
  return kTransient;
}

void run_train(TrainArgs& args, DataParallelRun& dp) {
  // A model in training format (a checkpoint, --emit-onnx) may hold the loss scaler's ops.
  passes::register_amp_schemas();
  if (args.steps <= 0) throw Error("--steps must be at least 1");
  if (!args.eval_data.empty() && args.holdout > 0)
    throw Error("--eval and --holdout both name held-out data; give one");
  if (args.checkpoint_every > 0 && args.checkpoint.empty())
    throw Error("--checkpoint-every needs --checkpoint FILE");
  // Diagnoses (--find-nonfinite, the consecutive-skips guard) of an ONNX model run on its
  // training step compiled without fusion, where every step is one ONNX node, so the origin
  // names that node; a .plan keeps its own steps (a fused kernel is named by its nodes).
  TrainArgs unfused_args = args;
  unfused_args.compile.lowering.fuse = false;
  std::unique_ptr<rt::cpu::Executor> unfused;
  args.world = dp.world();
  // Data parallel on GPUs: each rank its own, cuda:LOCAL_RANK, unless an index is given.
  const Device device = parse_device(args.device == "cuda" && dp.world() > 1
                                         ? "cuda:" + std::to_string(dp.local_rank())
                                         : args.device);
  args.target = compile_target(device);  // a missing GPU is reported before compiling
  plan::Plan compiled = training_plan(args);
  if (compiled.outputs_size() < 1) throw Error("the plan has no output to report as the loss");
  if (dp.world() > 1 && !plan_reduces_gradients(compiled))
    throw Error("'" + args.model +
                "' does not all-reduce its gradients: compile it with `ampc "
                "compile --train --data-parallel` to train it on " +
                std::to_string(dp.world()) + " ranks");
  const std::vector<std::string> losses = loss_names(compiled);
  const std::string& loss_name = losses[0];  // held-out evaluation reports the first loss
  // One optimizer step is `accum` runs of the plan, one micro-batch each.
  const int64_t accum = accum_steps_of(compiled);
  const AmpOutputs amp = amp_outputs(compiled);
  // On a GPU the steps up to the next log line or checkpoint run ahead: the host waits for
  // the device once per window (step_window.h). The CPU and --find-nonfinite run one at a time.
  const int64_t ahead = device.cuda && !args.find_nonfinite ? args.log_every : 1;
  const std::unique_ptr<rt::Backend> backend =
      make_backend(std::move(compiled), device, std::min<int64_t>(ahead * accum, 1024), args.model);
  rt::Backend& executor = *backend;
  if (device.cuda && plan_reduces_gradients(executor.plan())) dp.start_gpu_communication();
  const auto& p = executor.plan();
  // Diagnoses run on the CPU backend: this executor, or one made for them.
  auto diagnosis = [&]() -> rt::cpu::Executor& {
    if (plan::looks_like_plan(args.model) || !args.compile.lowering.fuse) {
      if (auto* cpu = dynamic_cast<rt::cpu::Executor*>(&executor)) return *cpu;
      if (!unfused) unfused = std::make_unique<rt::cpu::Executor>(executor.plan());
      return *unfused;
    }
    if (!unfused) unfused = std::make_unique<rt::cpu::Executor>(training_plan(unfused_args));
    return *unfused;
  };

  // Everything is checked before the first step: data against the plan's inputs, the
  // checkpoint against its state, and that checkpoints can be written at all.
  const PlanInputs inputs = plan_inputs(p);
  dp.check_same_plan(p, run_key(args.data, args.eval_data, args.holdout, args.shuffle, args.seed,
                                args.steps, args.resume));
  GradStats grad_stats(p, args.grad_stats);
  auto [train_data, eval_data] = open_data(args);
  rt::data::Batcher batcher(train_data, inputs.specs,
                            {.batch_size = inputs.batch,
                             .shuffle = args.shuffle,
                             .seed = args.seed,
                             .shard = dp.rank(),
                             .shards = dp.world()});
  rt::io::TrainingProgress progress;
  if (!args.resume.empty()) {
    const auto ckpt = rt::io::read_checkpoint(args.resume);
    try {
      executor.load_state(ckpt.initializers);
    } catch (const Error& e) {
      throw Error("--resume " + args.resume + " does not fit this plan: " + e.what());
    }
    progress = ckpt.progress;
    batcher.set_position(progress.data_position);
    std::cerr << "resumed from " << args.resume << " after step " << progress.step << '\n';
  }
  // Dropout masks follow the seed and the step, so a resumed run draws the same ones.
  executor.set_random_state(args.seed, progress.step * accum);
  if (!args.checkpoint.empty()) rt::io::model_with_state(p, executor.state());
  const float lr = compiled_lr(executor);

  std::ofstream log;
  if (!args.log_file.empty() && dp.rank() == 0) {  // rank 0 logs and checkpoints
    log.open(args.log_file, std::ios::trunc);
    if (!log) throw Error("cannot write '" + args.log_file + "'");
  }
  const int64_t first = progress.step, last = progress.step + args.steps;
  const int64_t step_samples = inputs.batch * accum * dp.world();  // the global batch
  Progress bar(first, last, args.log_every, step_samples, ::isatty(STDERR_FILENO));
  const auto start = std::chrono::steady_clock::now();
  int64_t skipped_steps = 0, consecutive_skips = 0;
  std::map<std::string, rt::Tensor> state_before;  // --find-nonfinite: before a micro-batch
  StepWindow window(executor, batcher, accum, ahead,
                    [&](std::map<std::string, rt::Tensor>& feeds, int64_t step, int64_t k) {
                      grad_stats.feed(feeds, step, k == accum - 1);
                      if (args.find_nonfinite) state_before = executor.state();
                    });
  // The last step of the window that starts at `step`: the next log line, checkpoint or end.
  auto window_end = [&](int64_t step) {
    auto next = [&](int64_t every) { return first + ((step - first - 1) / every + 1) * every; };
    int64_t end = std::min(last, next(args.log_every));
    if (args.checkpoint_every > 0) end = std::min(end, next(args.checkpoint_every));
    return end;
  };
  // SIGINT/SIGTERM from here on finish the step, write the checkpoint and exit (interrupt.h).
  InterruptGuard interrupt_guard;
  for (int64_t step = first + 1; step <= last; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    dp.set_phase("step " + std::to_string(step));
    // The step's micro-batches: the plan decides on the last one whether to step; the log
    // reports the mean of the micro-batches' losses (each the sum of the losses).
    std::vector<MicroBatch> runs;  // the step's batches (and states: --find-nonfinite)
    std::map<std::string, rt::Tensor> outputs;
    std::vector<double> loss_sums(losses.size(), 0.0);
    for (int64_t k = 0; k < accum; ++k) {
      MicroBatch& run = runs.emplace_back();
      StepWindow::Run done = window.next(step, k, window_end(step));
      run.batch = std::move(done.batch);
      if (args.find_nonfinite) run.state_before = std::move(state_before);
      outputs = std::move(done.outputs);
      for (size_t i = 0; i < losses.size(); ++i) loss_sums[i] += scalar_of(outputs.at(losses[i]));
    }
    const double seconds =
        ahead > 1 ? window.step_seconds()
                  : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    grad_stats.write(step, outputs);
    // Several ranks: the losses averaged over them; an interrupt stops every rank at one step.
    const int signal = agree_on_step(
        dp, step, loss_sums, !amp.found_inf.empty() && outputs.at(amp.found_inf).data<bool>()[0],
        InterruptGuard::signal_received());
    double loss_total = 0;
    for (double& l : loss_sums) loss_total += (l /= static_cast<double>(accum));
    const auto loss = static_cast<float>(loss_total);
    // With the non-finite check compiled in, the plan has already skipped such a step.
    if (!std::isfinite(loss) && amp.found_inf.empty())
      throw Error("step " + std::to_string(step) + ": the loss is " + format_number(loss));
    const bool skipped = !amp.found_inf.empty() && outputs.at(amp.found_inf).data<bool>()[0];
    if (args.find_nonfinite && (skipped || !std::isfinite(loss))) {
      bar.finish();  // end the bar's line; it goes on below
      std::cerr << "step " << step << (skipped ? " skipped: " : ": ")
                << first_origin(diagnosis(), runs, nullptr, args.seed, step) << '\n';
    }
    const double scale = amp.scale.empty() ? 1.0 : scalar_of(outputs.at(amp.scale));
    progress = {step, window.position()};
    if (log.is_open()) {
      const float step_lr = amp.step_lr.empty() ? lr : scalar_of(outputs.at(amp.step_lr));
      nlohmann::ordered_json grad_norm = nullptr;
      if (!amp.grad_norm.empty()) grad_norm = scalar_of(outputs.at(amp.grad_norm));
      nlohmann::ordered_json j = {{"step", step},
                                  {"loss", loss},
                                  {"lr", step_lr},
                                  {"scale", scale},
                                  {"skipped", skipped},
                                  {"grad_norm", grad_norm},
                                  {"samples_per_s", seconds > 0 ? step_samples / seconds : 0.0}};
      if (losses.size() > 1) {  // each loss (mean over the micro-batches); `loss` is their sum
        nlohmann::ordered_json each = nlohmann::ordered_json::object();
        for (size_t i = 0; i < losses.size(); ++i)
          each[losses[i]] = static_cast<float>(loss_sums[i]);
        j["losses"] = each;
      }
      log << j.dump() << '\n' << std::flush;
    }
    skipped_steps += skipped;
    consecutive_skips = skipped ? consecutive_skips + 1 : 0;
    if (args.max_consecutive_skips > 0 && consecutive_skips >= args.max_consecutive_skips) {
      // Skipped steps left the parameters as they were, so running the step's batches again
      // from the current state shows where the values stop being finite.
      const auto now = executor.state();
      std::string why = first_origin(diagnosis(), runs, &now, args.seed, step);
      for (size_t k; (k = why.find("\n  ")) != std::string::npos;)
        why.replace(k, 3, why[k - 1] == ':' ? " " : "; ");
      throw Error(consecutive_skips_message(executor, step, consecutive_skips, loss) +
                  ". Diagnosis (the last batch run again): " + why);
    }
    if (dp.rank() == 0) bar.step_done(step, loss);  // one progress for the run
    const bool save_now = args.checkpoint_every > 0 && (step - first) % args.checkpoint_every == 0;
    if (!args.checkpoint.empty() && dp.rank() == 0 && (save_now || step == last))
      rt::io::write_checkpoint(p, executor.state(), progress, args.checkpoint);
    // On a GPU the state is read at the end of a window (the steps ahead are already queued).
    if (const int sig = dp.world() > 1 ? signal : InterruptGuard::signal_received();
        sig != 0 && (ahead == 1 || step == window_end(step))) {
      bar.finish();
      if (!args.checkpoint.empty() && dp.rank() == 0 && !save_now && step != last)
        rt::io::write_checkpoint(p, executor.state(), progress, args.checkpoint);
      if (log.is_open()) log.close();
      std::cerr << interrupted_message(sig, step, last, args.checkpoint) << '\n';
      exit_interrupted(sig);
    }
  }
  bar.finish();
  if (args.dp.check_replicas) {
    const int64_t n = dp.check_same_state(executor.state());
    if (dp.rank() == 0)
      std::printf("replicas: %lld states identical on %d ranks\n", static_cast<long long>(n),
                  dp.world());
  }
  if (dp.rank() != 0) {  // rank 0 reports; the others evaluate their share of the held-out data
    if (eval_data) evaluate(p, executor.state(), loss_name, *eval_data, &dp);
    return;
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("trained %lld steps in %.2f s (%.0f samples/s)\n", static_cast<long long>(args.steps),
              wall, static_cast<double>(args.steps * step_samples) / wall);
  if (!amp.found_inf.empty()) {
    std::printf("loss scaling: %lld of %lld steps skipped (non-finite gradients)",
                static_cast<long long>(skipped_steps), static_cast<long long>(args.steps));
    if (const auto s = current_scale(executor)) std::printf(", final scale %g", *s);
    std::printf("\n");
  }
  if (const std::string d = device_summary(executor); !d.empty())
    std::printf("device: %s\n", d.c_str());
  if (const std::string c = dp.comm_summary(args.steps); !c.empty())
    std::printf("data parallel: %s\n", c.c_str());
  if (!args.checkpoint.empty()) std::printf("checkpoint: %s\n", args.checkpoint.c_str());
  if (eval_data) {
    std::printf("held-out: %s\n",
                describe(evaluate(p, executor.state(), loss_name, *eval_data, &dp)).c_str());
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  auto& o = args->compile;
  auto* cmd = app.add_subcommand(
      "train", "Train a model (ONNX, compiled for training on the fly, or a training plan)");
  cmd->add_option("model", args->model,
                  "ONNX model whose output is the loss, or a plan from `ampc compile --train`")
      ->required();
  cmd->add_option("--data", args->data,
                  ".npz file or folder of .npy files, one array per graph input")
      ->required();
  cmd->add_option("--steps", args->steps,
                  "Optimizer steps to run (after --resume: more steps); with --accum-steps N, N "
                  "batches each");
  cmd->add_flag("--shuffle", args->shuffle, "Shuffle every epoch (reproducibly, see --seed)");
  cmd->add_option("--seed", args->seed, "Seed of the shuffle and of dropout masks");
  cmd->add_option("--log", args->log_file, "Write one JSON object per step to this .jsonl file");
  cmd->add_option("--log-every", args->log_every,
                  "Progress line every K steps (when stderr is not a terminal)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--eval", args->eval_data,
                  "Held-out data (.npz or .npy folder): loss and accuracy after training");
  cmd->add_option("--holdout", args->holdout,
                  "Hold out this share of --data (its last samples) for evaluation, e.g. 0.2")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--checkpoint", args->checkpoint,
                  "Write an ONNX checkpoint (trained model + optimizer state) here at the end");
  cmd->add_option("--checkpoint-every", args->checkpoint_every, "... and every K steps")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--resume", args->resume,
                  "Continue from a checkpoint of the same plan (state and data position)");
  cmd->add_option("--input-shape", args->input_shapes,
                  "Fix an input's shape: NAME=D0xD1x... (repeatable)");
  cmd->add_flag("--find-nonfinite", args->find_nonfinite,
                "Run every skipped step again with a check after each plan step and name the "
                "ONNX node that first produced a NaN or infinity");
  cmd->add_option("--max-consecutive-skips", args->max_consecutive_skips,
                  "Stop with an explanation after K steps in a row skipped for non-finite "
                  "gradients (default 50; 0: never)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", args->device,
                  "Where to train: cpu (default), cuda or cuda:N (the GPU of that index)");
  add_training_options(cmd, o, args->training);
  add_grad_stats_options(cmd, args->grad_stats);
  add_data_parallel_options(cmd, args->dp, /*train=*/true);
  cmd->callback([args] {
    with_data_parallel_run(args->dp, [&](DataParallelRun& dp) { run_train(*args, dp); });
  });
}

}  // namespace ampc::cli
