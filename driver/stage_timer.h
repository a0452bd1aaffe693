// Compile-time profile: wall-clock seconds and the graph's node count after each stage of
// the pipeline (`ampc compile --time-passes`, scripts/bench_compile.py).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ampc::compiler {

struct StageTime {
  std::string stage;
  double seconds = 0;
  int64_t nodes = -1;  // graph nodes (or plan steps, for lowering stages) after the stage
};

using StageTimes = std::vector<StageTime>;

// Times one stage from construction to finish(); appends to `times` when it is not null
// (the pipeline always creates one; without a profile it records nothing).
class StageTimer {
 public:
  StageTimer(StageTimes* times, std::string stage)
      : times_(times), stage_(std::move(stage)), start_(std::chrono::steady_clock::now()) {}
  void finish(int64_t nodes) {
    if (!times_) return;
    const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start_;
    times_->push_back({stage_, d.count(), nodes});
    times_ = nullptr;
  }

 private:
  StageTimes* times_;
  std::string stage_;
  std::chrono::steady_clock::time_point start_;
};

// The table `--time-passes` prints: stage, milliseconds, nodes after, and the total.
std::string format_stage_times(const StageTimes& times);

}  // namespace ampc::compiler
