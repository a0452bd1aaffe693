// `ampc bench`'s options, one model's measured result, and its text and JSON output
// (bench_output.cc); the measuring is bench_command.cc's.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ampc::cli {

struct BenchArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::vector<std::string> input_shapes;
  int warmup = 10;
  int iterations = 100;
  std::string format = "text";
  bool profile = false;
  int slowest = 5;      // --profile: how many of the most expensive steps to list
  std::string against;  // a second model timed in turns with the first (bench_command.cc)
  int turn = 5;         // --against: timed iterations of a model per turn
};

// Time of one op type (node empty, steps summed) or of one step (node: its first source node).
struct OpTime {
  std::string op;
  std::string node;
  int steps = 0;  // per forward pass
  double ms = 0;  // per forward pass
};

struct Result {
  std::string model;
  int steps = 0;
  double compile_ms = 0;   // 0 for a plan
  std::vector<double> ms;  // per timed iteration, sorted
  double iterations_per_s = 0;
  std::vector<OpTime> ops;      // --profile: per op type, most expensive first
  std::vector<OpTime> slowest;  // --profile: the --slowest most expensive steps
};

// The q-quantile of sorted samples, linearly interpolated.
double quantile(const std::vector<double>& sorted, double q);

// One model's JSON object: its name, steps, threads, timed iterations, compile time, latency
// and, with --profile, its op types and slowest steps.
nlohmann::ordered_json result_json(const BenchArgs& args, const Result& r);
// One model's text: what ran, its latency and, with --profile, its op types and slowest steps.
void print_text(const BenchArgs& args, const Result& r);
// Two models timed in turns (--against): both, and `ratios` (sorted: b / a of each pair of
// neighbouring turns), as text or JSON (args.format).
void print_pairs(const BenchArgs& args, const Result& a, const Result& b,
                 const std::vector<double>& ratios);

}  // namespace ampc::cli
