#include "tools/ampc/bench_output.h"

#include <omp.h>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <string>

namespace ampc::cli {

// The q-quantile of sorted samples, linearly interpolated.
double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

namespace {

// The latency statistics of one model's timed iterations (JSON).
nlohmann::ordered_json latency_json(const Result& r) {
  nlohmann::ordered_json j;
  j["median_ms"] = quantile(r.ms, 0.5);
  j["p10_ms"] = quantile(r.ms, 0.1);
  j["p90_ms"] = quantile(r.ms, 0.9);
  j["min_ms"] = r.ms.front();
  j["iterations_per_s"] = r.iterations_per_s;
  return j;
}

void print_latency(const Result& r) {
  std::cout << std::fixed << std::setprecision(3) << "  median " << quantile(r.ms, 0.5)
            << " ms   p10 " << quantile(r.ms, 0.1) << " ms   p90 " << quantile(r.ms, 0.9)
            << " ms   min " << r.ms.front() << " ms   " << std::setprecision(1)
            << r.iterations_per_s << " iterations/s\n";
}

}  // namespace

nlohmann::ordered_json result_json(const BenchArgs& args, const Result& r) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
  j["steps"] = r.steps;
  j["threads"] = omp_get_max_threads();
  j["warmup"] = args.warmup;
  j["iterations"] = r.ms.size();  // the timed samples, as many as --iterations
  j["compile_ms"] = r.compile_ms;
  j.update(latency_json(r));
  if (args.profile) {
    j["profile"] = nlohmann::json::array();
    for (const auto& t : r.ops)
      j["profile"].push_back({{"op", t.op}, {"steps", t.steps}, {"ms", t.ms}});
    j["slowest_steps"] = nlohmann::json::array();
    for (const auto& t : r.slowest)
      j["slowest_steps"].push_back({{"op", t.op}, {"node", t.node}, {"ms", t.ms}});
  }
  return j;
}

void print_text(const BenchArgs& args, const Result& r) {
  std::cout << std::fixed << std::setprecision(3) << r.model << ": " << r.steps << " steps, "
            << omp_get_max_threads() << " OpenMP threads, " << args.warmup << " warmup + "
            << args.iterations << " timed iterations";
  if (r.compile_ms > 0) std::cout << " (compiled in " << r.compile_ms << " ms)";
  std::cout << "\n";
  print_latency(r);
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

// The op types of two profiles side by side: each type's ms per iteration in a and in b, and
// b / a; the types of either, the most expensive (on either side) first.
void print_profiles_side_by_side(const Result& a, const Result& b) {
  struct Row {
    std::string op;
    double a = 0, b = 0;
  };
  std::map<std::string, Row> rows;
  for (const auto& t : a.ops) rows[t.op] = {t.op, t.ms, 0};
  for (const auto& t : b.ops) {
    Row& r = rows[t.op];
    r.op = t.op;
    r.b = t.ms;
  }
  std::vector<Row> sorted;
  for (const auto& [op, r] : rows) sorted.push_back(r);
  std::sort(sorted.begin(), sorted.end(),
            [](const Row& x, const Row& y) { return std::max(x.a, x.b) > std::max(y.a, y.b); });
  std::cout << "  per op type, ms per iteration, side by side (" << a.model << " | " << b.model
            << " | second / first):\n";
  for (const Row& r : sorted) {
    std::cout << "    " << std::left << std::setw(26) << r.op << std::right << std::setw(10)
              << std::setprecision(4) << r.a << std::setw(10) << r.b;
    if (r.a > 0 && r.b > 0) std::cout << std::setw(8) << std::setprecision(2) << r.b / r.a;
    std::cout << "\n";
  }
}

// `ratios` sorted: b / a of each pair of neighbouring turns.
void print_pairs(const BenchArgs& args, const Result& a, const Result& b,
                 const std::vector<double>& ratios) {
  if (args.format == "json") {
    nlohmann::ordered_json j = result_json(args, a);
    j["against"] = result_json(args, b);
    j["paired_ratio"] = {{"turn", args.turn},
                         {"pairs", ratios.size()},
                         {"median", quantile(ratios, 0.5)},
                         {"p10", quantile(ratios, 0.1)},
                         {"p90", quantile(ratios, 0.9)}};
    std::cout << j.dump(2) << '\n';
    return;
  }
  print_text(args, a);
  print_text(args, b);
  if (args.profile) print_profiles_side_by_side(a, b);
  std::cout << std::fixed << std::setprecision(3) << "  " << b.model << " / " << a.model
            << ", turns of " << args.turn << " iterations, per pair of turns: median "
            << quantile(ratios, 0.5) << "   p10 " << quantile(ratios, 0.1) << "   p90 "
            << quantile(ratios, 0.9) << "\n";
}

}  // namespace ampc::cli
