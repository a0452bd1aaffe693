// The trainer's side of the range statistics (`ampc train --grad-stats FILE.jsonl`): which
// plan outputs hold them (the ampc.RangeStats steps the compiler emitted, passes/range_stats.h),
// the plan input that switches them on, and one JSON line per tensor per recorded step.
//
// A record: {"step", "kind" ("gradient"|"activation"), "tensor", "node", "depth", "numel",
// "scale", "max_abs", "min_nonzero_abs" (null when every element is zero), "zero",
// "nonfinite", "unscaled": {"flush", "subnormal", "normal", "overflow"}, "scaled": {...},
// "exp_hist": {"E": count}}: fractions of numel; "unscaled" classifies the value, "scaled"
// the value times the step's loss scale (1 for activations and unscaled steps) against fp16
// (flush |x| < 2^-24, subnormal < 2^-14, overflow > 65504, normal otherwise); exp_hist counts
// the non-zero finite elements by floor(log2 |x|) (-127 holds fp32 subnormals).
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::rt::stats {

// The plan input that enables the statistics for a run (the name passes/range_stats.h gives
// it; the runtime does not include passes/).
inline constexpr const char* kStatsEnabledInput = "stats.enabled";

struct StatsTensor {
  std::string output;  // the plan output holding the statistics
  std::string kind, tensor, node;
  int64_t depth = 0;
};

// The plan's RangeStats steps, in plan order; empty when it has none.
std::vector<StatsTensor> stats_tensors(const plan::Plan& p);

// One record from a RangeStats result (kernels/shared/range_stats.h layout).
nlohmann::ordered_json stats_record(const StatsTensor& t, int64_t step, const double* stats);

class RangeStatsLog {
 public:
  // Throws ampc::Error when the plan has no statistics or the file cannot be written.
  RangeStatsLog(const plan::Plan& p, const std::string& path, int64_t every);
  // Whether optimizer step `step` (counted from 1) is recorded: 1, 1 + every, 1 + 2 every...
  bool records(int64_t step) const { return (step - 1) % every_ == 0; }
  // Sets the enabling input of one run in `feeds`.
  static void set_enabled(std::map<std::string, Tensor>& feeds, bool enabled);
  // Writes the records of `step` from a run's outputs.
  void write(int64_t step, const std::map<std::string, Tensor>& outputs);

 private:
  std::vector<StatsTensor> tensors_;
  std::ofstream out_;
  int64_t every_;
};

}  // namespace ampc::rt::stats
