// `ampc train --grad-stats FILE.jsonl [--grad-stats-every K] [--activation-stats]`: the
// options, what they ask of the compiler, and the per-run switch of the statistics
// (runtime/stats/range_stats_log.h does the work).
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <string>

#include "passes/range_stats.h"
#include "runtime/stats/range_stats_log.h"

namespace ampc::cli {

struct GradStatsArgs {
  std::string file;
  int64_t every = 10;
  bool activations = false;
  passes::RangeStatsOptions compile_options() const {
    return {.gradients = !file.empty(), .activations = !file.empty() && activations};
  }
};

void add_grad_stats_options(CLI::App* cmd, GradStatsArgs& args);

// The statistics of one training run: the log when asked for, and the switch every run of
// a plan with statistics needs (off but at the recorded steps).
class GradStats {
 public:
  GradStats(const plan::Plan& p, const GradStatsArgs& args);
  // The switch for one run of optimizer step `step`; `last_micro`: the run after which the
  // gradients are complete (the last micro-batch).
  void feed(std::map<std::string, rt::Tensor>& feeds, int64_t step, bool last_micro) const;
  // Writes step `step`'s records when it is recorded.
  void write(int64_t step, const std::map<std::string, rt::Tensor>& outputs);

 private:
  bool has_input_ = false;
  std::unique_ptr<rt::stats::RangeStatsLog> log_;
};

}  // namespace ampc::cli
