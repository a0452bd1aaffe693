// `ampc bench MODEL.onnx|MODEL.plan`: forward latency on the CPU. A measurement, not a test.
// Inputs not given with --input are synthesised: floats uniform in [0,1) (fixed seed),
// integers and bools 0, so every run of the command times the same computation.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"
#include "runtime/io/npy.h"
#include "runtime/io/tensor_pb.h"
#include "runtime/plan/plan_file.h"
#include "tools/ampc/commands.h"

namespace ampc::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::vector<std::string> input_shapes;
  int warmup = 10;
  int iterations = 100;
  std::string format = "text";
  bool profile = false;
  int slowest = 5;  // --profile: how many of the most expensive steps to list
};

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

// The q-quantile of sorted samples, linearly interpolated.
double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

// Time of one op type (node empty, steps summed) or of one step (node: its first source node).
struct OpTime {
  std::string op;
  std::string node;
  int steps = 0;  // per forward pass
  double ms = 0;  // per forward pass
};

struct Result {
  int steps = 0;
  double compile_ms = 0;   // 0 for a plan
  std::vector<double> ms;  // per timed iteration, sorted
  double iterations_per_s = 0;
  std::vector<OpTime> ops;      // --profile: per op type, most expensive first
  std::vector<OpTime> slowest;  // --profile: the --slowest most expensive steps
};

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

void print_json(const BenchArgs& args, const Result& r) {
  nlohmann::ordered_json j;
  j["model"] = args.model;
  j["steps"] = r.steps;
  j["threads"] = omp_get_max_threads();
  j["warmup"] = args.warmup;
  j["iterations"] = args.iterations;
  j["compile_ms"] = r.compile_ms;
  j["median_ms"] = quantile(r.ms, 0.5);
  j["p10_ms"] = quantile(r.ms, 0.1);
  j["p90_ms"] = quantile(r.ms, 0.9);
  j["min_ms"] = r.ms.front();
  j["iterations_per_s"] = r.iterations_per_s;
  if (args.profile) {
    j["profile"] = nlohmann::json::array();
    for (const auto& t : r.ops)
      j["profile"].push_back({{"op", t.op}, {"steps", t.steps}, {"ms", t.ms}});
    j["slowest_steps"] = nlohmann::json::array();
    for (const auto& t : r.slowest)
      j["slowest_steps"].push_back({{"op", t.op}, {"node", t.node}, {"ms", t.ms}});
  }
  std::cout << j.dump(2) << '\n';
}

void print_text(const BenchArgs& args, const Result& r) {
  std::cout << std::fixed << std::setprecision(3) << args.model << ": " << r.steps << " steps, "
            << omp_get_max_threads() << " OpenMP threads, " << args.warmup << " warmup + "
            << args.iterations << " timed iterations";
  if (r.compile_ms > 0) std::cout << " (compiled in " << r.compile_ms << " ms)";
  std::cout << "\n  median " << quantile(r.ms, 0.5) << " ms   p10 " << quantile(r.ms, 0.1)
            << " ms   p90 " << quantile(r.ms, 0.9) << " ms   min " << r.ms.front() << " ms   "
            << std::setprecision(1) << r.iterations_per_s << " iterations/s\n";
  if (!args.profile) return;
  double step_ms = 0;
  for (const auto& t : r.ops) step_ms += t.ms;
  std::cout << "  per op type, per forward pass (steps timed one by one, " << std::setprecision(3)
            << step_ms << " ms in all):\n";
  for (const auto& t : r.ops) {
    std::cout << "    " << std::left << std::setw(26) << t.op << std::right << std::setw(4)
              << t.steps << " steps " << std::setw(9) << std::setprecision(4) << t.ms << " ms "
              << std::setw(6) << std::setprecision(1) << (step_ms > 0 ? 100 * t.ms / step_ms : 0)
              << " %\n";
  }
  std::cout << "  slowest steps:\n";
  for (const auto& t : r.slowest) {
    std::cout << "    " << std::setw(9) << std::setprecision(4) << t.ms << " ms  " << t.op << " '"
              << t.node << "'\n";
  }
}

void run_bench(const BenchArgs& args) {
  if (args.iterations < 1 || args.warmup < 0) {
    throw Error("--iterations must be at least 1 and --warmup at least 0");
  }
  std::map<std::string, rt::Tensor> feeds = read_inputs(args.inputs);
  plan::Plan p;
  double compile_ms = 0;
  if (plan::looks_like_plan(args.model)) {
    if (!args.input_shapes.empty()) {
      throw Error("--input-shape applies to ONNX models; a plan's shapes are fixed");
    }
    p = plan::load_plan(args.model);
  } else {
    compiler::CompileOptions options;
    options.lowering.target = "cpu";  // timed on the CPU backend
    for (const auto& spec : args.input_shapes) onnx_io::parse_input_shape(spec, options.import);
    // As `ampc run`: an ONNX model is compiled for the shapes of the given inputs.
    for (const auto& [name, t] : feeds) options.import.input_shapes.emplace(name, t.shape());
    const auto start = Clock::now();
    p = compiler::compile_file(args.model, options);
    compile_ms = ms_since(start);
  }
  std::mt19937 rng(0);
  for (const auto& binding : p.inputs()) {
    if (!feeds.count(binding.name())) {
      feeds[binding.name()] = synthesize(p.buffers(binding.buffer()), rng);
    }
  }
  rt::cpu::Executor executor(std::move(p));
  Result r = measure(executor, feeds, args);
  r.compile_ms = compile_ms;
  if (args.format == "json") {
    print_json(args, r);
  } else {
    print_text(args, r);
  }
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
  cmd->add_flag("--profile", args->profile, "Also print time per op type (steps timed one by one)");
  cmd->add_option("--slowest", args->slowest,
                  "With --profile: how many of the slowest steps to list")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->callback([args] { run_bench(*args); });
}

}  // namespace ampc::cli
