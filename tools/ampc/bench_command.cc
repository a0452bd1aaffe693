// `ampc bench MODEL.onnx|MODEL.plan`: forward latency on the CPU. A measurement, not a test.
// Inputs not given with --input are synthesised: floats uniform in [0,1) (fixed seed),
// integers and bools 0, so every run of the command times the same computation.
//
// `--against OTHER`: both models in one process, taking turns of --turn iterations (A B, B A,
// A B, ...), and the ratio OTHER / MODEL of the medians of each pair of turns. Timed in
// separate runs, two models' ratio moves with whatever else the machine does between the runs
// (a shared host's speed drifts by 10-20% over minutes); neighbouring turns see the same
// machine, so the median of the pairs' ratios is the comparison to quote. Each turn begins with
// an untimed iteration: the other model has just filled the caches with its own weights, which
// a training run of one model would not see. With --profile each model's steps are timed in
// its timed iterations, and the op types are printed side by side.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "base/error.h"
#include "driver/pipeline.h"
#include "frontend/onnx/read_model.h"
#include "runtime/cpu/executor.h"
#include "runtime/io/npy.h"
#include "runtime/io/tensor_pb.h"
#include "runtime/plan/plan_file.h"
#include "tools/ampc/bench_output.h"
#include "tools/ampc/commands.h"

namespace ampc::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::map<std::string, rt::Tensor> read_inputs(const std::vector<std::string>& specs) {
  std::map<std::string, rt::Tensor> feeds;
  for (const auto& spec : specs) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error("--input '" + spec + "': expected NAME=FILE (.npy or .pb)");
    }
    const std::string file = spec.substr(eq + 1);
    const bool npy = file.size() >= 4 && file.compare(file.size() - 4, 4, ".npy") == 0;
    feeds[spec.substr(0, eq)] = npy ? rt::io::read_npy(file) : rt::io::read_tensor_pb(file);
  }
  return feeds;
}

// A deterministic value for a plan input that was not given: see the file comment.
rt::Tensor synthesize(const plan::Buffer& buf, std::mt19937& rng) {
  if (!buf.shape_known()) {
    throw Error("input '" + buf.name() + "' has no static shape: give it with --input");
  }
  const auto dtype = static_cast<DType>(buf.dtype());
  rt::Tensor t(dtype, {buf.shape().begin(), buf.shape().end()});
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (dtype) {
      case DType::kFloat32:
        t.data<float>()[i] = uniform(rng);
        break;
      case DType::kFloat64:
        t.data<double>()[i] = uniform(rng);
        break;
      case DType::kFloat16:
        t.data<Half>()[i] = float_to_half(uniform(rng));
        break;
      case DType::kBFloat16:
        t.data<BFloat16>()[i] = float_to_bf16(uniform(rng));
        break;
      default:
        return t;  // zero-filled
    }
  }
  return t;
}

void sort_by_time(std::vector<OpTime>& times) {
  std::sort(times.begin(), times.end(),
            [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
}

// Fills r.ops and r.slowest from the summed time of each step over `iterations` passes.
void attribute(const plan::Plan& p, const std::vector<double>& step_seconds, int iterations,
               int slowest, Result& r) {
  std::map<std::string, OpTime> by_op;
  std::vector<OpTime> steps;
  for (int i = 0; i < p.steps_size(); ++i) {
    const auto& s = p.steps(i);
    const double ms = step_seconds[i] * 1e3 / iterations;
    steps.push_back({s.op(), s.source_nodes_size() ? s.source_nodes(0) : "?", 1, ms});
    OpTime& t = by_op[s.op()];
    t.op = s.op();
    t.steps += 1;
    t.ms += ms;
  }
  for (const auto& [name, t] : by_op) r.ops.push_back(t);
  sort_by_time(r.ops);
  sort_by_time(steps);
  steps.resize(std::min<size_t>(steps.size(), static_cast<size_t>(slowest)));
  r.slowest = steps;
}

Result measure(rt::cpu::Executor& executor, const std::map<std::string, rt::Tensor>& feeds,
               const BenchArgs& args) {
  Result r;
  r.model = args.model;
  r.steps = executor.plan().steps_size();
  for (int i = 0; i < args.warmup; ++i) executor.run(feeds);
  std::vector<double> step_seconds(r.steps, 0.0);
  if (args.profile) executor.set_step_hook([&](int step, double s) { step_seconds[step] += s; });
  r.ms.resize(args.iterations);
  const auto total_start = Clock::now();
  for (double& sample : r.ms) {
    const auto start = Clock::now();
    executor.run(feeds);
    sample = ms_since(start);
  }
  r.iterations_per_s = args.iterations * 1e3 / ms_since(total_start);
  executor.set_step_hook(nullptr);
  std::sort(r.ms.begin(), r.ms.end());
  if (args.profile) attribute(executor.plan(), step_seconds, args.iterations, args.slowest, r);
  return r;
}

// One model of a paired run: what it runs on and what it measured.
struct Side {
  rt::cpu::Executor* executor;
  const std::map<std::string, rt::Tensor>* feeds;
  Result result;
  std::vector<double> step_seconds;  // --profile: each step's time summed over timed iterations
};

double time_one(Side& side) {
  const auto start = Clock::now();
  side.executor->run(*side.feeds);
  return ms_since(start);
}

// One turn of a side: an untimed iteration (the caches held the other model's data), then
// `timed` iterations, appended to its samples (with --profile, their steps' times to its
// step_seconds); returns their median.
double turn(Side& side, int timed, bool profile) {
  side.executor->run(*side.feeds);
  if (profile) {
    side.executor->set_step_hook([&side](int step, double s) { side.step_seconds[step] += s; });
  }
  std::vector<double> ms(timed);
  for (double& t : ms) t = time_one(side);
  side.executor->set_step_hook(nullptr);
  side.result.ms.insert(side.result.ms.end(), ms.begin(), ms.end());
  std::sort(ms.begin(), ms.end());
  return quantile(ms, 0.5);
}

// Both sides warmed up, then turns of --turn timed iterations each until both have
// --iterations, the first side first in even pairs of turns and second in odd ones;
// `ratios`: b / a of the turns' medians, per pair of turns.
void measure_pairs(Side& a, Side& b, const BenchArgs& args, std::vector<double>& ratios) {
  for (int i = 0; i < args.warmup; ++i) {
    a.executor->run(*a.feeds);
    b.executor->run(*b.feeds);
  }
  for (Side* side : {&a, &b}) side->step_seconds.assign(side->executor->plan().steps_size(), 0.0);
  for (int done = 0, pair = 0; done < args.iterations; ++pair) {
    const int timed = std::min(args.turn, args.iterations - done);
    double ma, mb;
    if (pair % 2 == 0) {
      ma = turn(a, timed, args.profile);
      mb = turn(b, timed, args.profile);
    } else {
      mb = turn(b, timed, args.profile);
      ma = turn(a, timed, args.profile);
    }
    ratios.push_back(mb / ma);
    done += timed;
  }
  for (Side* side : {&a, &b}) {
    Result& r = side->result;
    double total = 0;
    for (double t : r.ms) total += t;
    r.iterations_per_s = static_cast<double>(r.ms.size()) * 1e3 / total;
    r.steps = side->executor->plan().steps_size();
    std::sort(r.ms.begin(), r.ms.end());
    if (args.profile) {
      attribute(side->executor->plan(), side->step_seconds, static_cast<int>(r.ms.size()),
                args.slowest, r);
    }
  }
  std::sort(ratios.begin(), ratios.end());
}

// A model as given on the command line, and the names of its inputs: a plan is loaded here,
// once; an ONNX model is read for its graph inputs and compiled later, for the shapes of the
// inputs it is given.
struct Source {
  std::string path;
  std::optional<plan::Plan> plan;
  std::set<std::string> inputs;
};

Source open_source(const std::string& path, const BenchArgs& args) {
  Source s{path, std::nullopt, {}};
  if (plan::looks_like_plan(path)) {
    if (!args.input_shapes.empty()) {
      throw Error("--input-shape applies to ONNX models; a plan's shapes are fixed");
    }
    s.plan = plan::load_plan(path);
    for (const auto& binding : s.plan->inputs()) s.inputs.insert(binding.name());
    return s;
  }
  const onnx::ModelProto proto = onnx_io::read_model_proto(path);
  for (const auto& in : proto.graph().input()) s.inputs.insert(in.name());
  for (const auto& init : proto.graph().initializer()) s.inputs.erase(init.name());
  return s;
}

// Each source's share of the given inputs: those it has an input of that name for (the same
// name feeds every source that has it). A name that no source has is refused.
std::vector<std::map<std::string, rt::Tensor>> route_inputs(
    const std::vector<Source>& sources, const std::map<std::string, rt::Tensor>& given) {
  std::vector<std::map<std::string, rt::Tensor>> shares(sources.size());
  for (const auto& [name, t] : given) {
    bool anywhere = false;
    for (size_t i = 0; i < sources.size(); ++i) {
      if (!sources[i].inputs.count(name)) continue;
      anywhere = true;
      shares[i].emplace(name, t);
    }
    if (!anywhere) {
      const std::string who =
          sources.size() == 1 ? sources[0].path + " has no" : "neither model has an";
      throw Error("--input '" + name + "': " + who + " input of that name");
    }
  }
  return shares;
}

struct Loaded {
  plan::Plan plan;
  double compile_ms = 0;  // 0 for a plan
};

// The source's plan, or its ONNX model compiled for the CPU and the shapes of its given inputs.
Loaded load_model(Source& source, const BenchArgs& args,
                  const std::map<std::string, rt::Tensor>& given) {
  Loaded l;
  if (source.plan) {
    l.plan = std::move(*source.plan);
    return l;
  }
  compiler::CompileOptions options;
  options.lowering.target = "cpu";  // timed on the CPU backend
  for (const auto& spec : args.input_shapes) onnx_io::parse_input_shape(spec, options.import);
  // As `ampc run`: an ONNX model is compiled for the shapes of the given inputs.
  for (const auto& [name, t] : given) options.import.input_shapes.emplace(name, t.shape());
  const auto start = Clock::now();
  l.plan = compiler::compile_file(source.path, options);
  l.compile_ms = ms_since(start);
  return l;
}

// The given inputs, and the synthesised ones (file comment) for the plan's other inputs.
std::map<std::string, rt::Tensor> feeds_for(const plan::Plan& p,
                                            const std::map<std::string, rt::Tensor>& given) {
  std::map<std::string, rt::Tensor> feeds = given;
  std::mt19937 rng(0);
  for (const auto& binding : p.inputs()) {
    if (!feeds.count(binding.name())) {
      feeds[binding.name()] = synthesize(p.buffers(binding.buffer()), rng);
    }
  }
  return feeds;
}

void run_bench(const BenchArgs& args) {
  if (args.iterations < 1 || args.warmup < 0) {
    throw Error("--iterations must be at least 1 and --warmup at least 0");
  }
  if (args.turn < 1) throw Error("--turn must be at least 1");
  const std::map<std::string, rt::Tensor> given = read_inputs(args.inputs);
  std::vector<Source> sources = {open_source(args.model, args)};
  if (!args.against.empty()) sources.push_back(open_source(args.against, args));
  const auto given_to = route_inputs(sources, given);
  Loaded a = load_model(sources[0], args, given_to[0]);
  const auto feeds_a = feeds_for(a.plan, given_to[0]);
  rt::cpu::Executor executor_a(std::move(a.plan));
  if (args.against.empty()) {
    Result r = measure(executor_a, feeds_a, args);
    r.compile_ms = a.compile_ms;
    if (args.format == "json") {
      std::cout << result_json(args, r).dump(2) << '\n';
    } else {
      print_text(args, r);
    }
    return;
  }
  Loaded b = load_model(sources[1], args, given_to[1]);
  const auto feeds_b = feeds_for(b.plan, given_to[1]);
  rt::cpu::Executor executor_b(std::move(b.plan));
  Side side_a{&executor_a, &feeds_a, {}, {}}, side_b{&executor_b, &feeds_b, {}, {}};
  side_a.result.model = args.model;
  side_b.result.model = args.against;
  side_a.result.compile_ms = a.compile_ms;
  side_b.result.compile_ms = b.compile_ms;
  std::vector<double> ratios;
  measure_pairs(side_a, side_b, args, ratios);
  print_pairs(args, side_a.result, side_b.result, ratios);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Time the forward pass of a model or plan on the CPU");
  cmd->add_option("model", args->model, "ONNX model (.onnx) or plan (.plan)")->required();
  cmd->add_option(
      "--input", args->inputs,
      "NAME=FILE (.npy or .pb) (repeatable); other inputs: floats in [0,1), integers 0");
  add_input_shape_option(cmd, args->input_shapes);
  cmd->add_option("--warmup", args->warmup, "Untimed forward passes first")->capture_default_str();
  cmd->add_option("--iterations", args->iterations, "Timed forward passes")->capture_default_str();
  cmd->add_option("--format", args->format, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_flag("--profile", args->profile,
                "Also print time per op type (steps timed one by one); with --against, of both "
                "models and side by side");
  cmd->add_option("--slowest", args->slowest,
                  "With --profile: how many of the slowest steps to list")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--against", args->against,
                  "A second model or plan, timed in turn with the first in this process; prints "
                  "both and the ratio of each pair of neighbouring turns (second / first)");
  cmd->add_option("--turn", args->turn,
                  "With --against: timed iterations of one model before the other's turn (each "
                  "turn first runs one untimed)")
      ->capture_default_str();
  cmd->callback([args] { run_bench(*args); });
}

}  // namespace ampc::cli
