// `ampc train MODEL.onnx|MODEL.plan --data DATA --steps N`: the training loop on the CPU.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "compiler/pipeline.h"
#include "runtime/cpu/executor.h"
#include "runtime/data/batcher.h"
#include "runtime/plan/plan_file.h"
#include "tools/ampc/commands.h"
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
  std::vector<std::string> input_shapes;
  compiler::CompileOptions compile;
  TrainingOptions training;
};

plan::Plan training_plan(TrainArgs& args) {
  if (plan::looks_like_plan(args.model)) {
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
  return compiler::compile_file(args.model, o);
}

float scalar_of(const rt::Tensor& t) {
  if (t.dtype() == DType::kFloat32) return t.data<float>()[0];
  if (t.dtype() == DType::kFloat64) return static_cast<float>(t.data<double>()[0]);
  throw Error("the loss is " + t.type_str() + ", not an fp32/fp64 scalar");
}

void run_train(TrainArgs& args) {
  if (args.steps <= 0) throw Error("--steps must be at least 1");
  rt::cpu::Executor executor(training_plan(args));
  const auto& p = executor.plan();

  // Inputs and batch size from the plan; the data is checked before the first step.
  std::map<std::string, rt::data::InputSpec> specs;
  int64_t batch = -1;
  for (const auto& binding : p.inputs()) {
    const auto& b = p.buffers(binding.buffer());
    if (!b.shape_known() || b.shape_size() == 0) {
      throw Error("input '" + binding.name() + "' needs a static shape with a batch axis");
    }
    specs[binding.name()] = {static_cast<DType>(b.dtype()),
                             {b.shape().begin() + 1, b.shape().end()}};
    if (batch >= 0 && batch != b.shape(0))
      throw Error("inputs disagree on the batch size (first axis)");
    batch = b.shape(0);
  }
  rt::data::Batcher batcher(rt::data::Dataset::open(args.data), specs,
                            {.batch_size = batch, .shuffle = args.shuffle, .seed = args.seed});
  if (p.outputs_size() < 1) throw Error("the plan has no output to report as the loss");
  const std::string loss_name = p.outputs(0).name();
  float lr = static_cast<float>(args.compile.optimizer.lr);
  for (const auto& [name, t] : executor.state()) {
    if (name == "optimizer.lr") lr = scalar_of(t);
  }

  std::ofstream log;
  if (!args.log_file.empty()) {
    log.open(args.log_file, std::ios::trunc);
    if (!log) throw Error("cannot write '" + args.log_file + "'");
  }
  const bool terminal = ::isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  double loss_sum = 0;
  int64_t loss_count = 0;
  for (int64_t step = 1; step <= args.steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto outputs = executor.run(batcher.next());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const float loss = scalar_of(outputs.at(loss_name));
    if (!std::isfinite(loss))
      throw Error("step " + std::to_string(step) + ": the loss is " + std::to_string(loss));
    loss_sum += loss;
    ++loss_count;
    if (log.is_open()) {
      nlohmann::ordered_json j = {{"step", step},
                                  {"loss", loss},
                                  {"lr", lr},
                                  {"scale", 1.0},
                                  {"skipped", false},
                                  {"grad_norm", nullptr},
                                  {"samples_per_s", seconds > 0 ? batch / seconds : 0.0}};
      log << j.dump() << '\n';
    }
    if (step % args.log_every == 0 || step == args.steps) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cerr << (terminal ? "\r" : "") << "step " << step << "/" << args.steps << "  loss "
                << loss_sum / static_cast<double>(loss_count) << "  "
                << static_cast<int64_t>(step * batch / elapsed) << " samples/s"
                << (terminal && step != args.steps ? "" : "\n") << std::flush;
      loss_sum = 0;
      loss_count = 0;
    }
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
  cmd->add_option("--steps", args->steps, "Optimizer steps");
  cmd->add_flag("--shuffle", args->shuffle, "Shuffle every epoch (reproducibly, see --seed)");
  cmd->add_option("--seed", args->seed, "Shuffle seed");
  cmd->add_option("--log", args->log_file, "Write one JSON object per step to this .jsonl file");
  cmd->add_option("--log-every", args->log_every, "Progress line every K steps")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--input-shape", args->input_shapes,
                  "Fix an input's shape: NAME=D0xD1x... (repeatable)");
  add_training_options(cmd, o, args->training);
  cmd->callback([args] { run_train(*args); });
}

}  // namespace ampc::cli
