// `ampc report`'s analysis of a --grad-stats log (range_stats_log.h): per tensor, pooled over
// the recorded steps, and the verdict on loss scaling with the static scale it proposes.
//
// fp16's classes are those of kernels/shared/range_stats.h. "Representable" is fp16's normal
// range: neither flushed to zero, nor subnormal (fewer significand bits), nor overflowing;
// fractions are of the non-zero elements. Exact zeros are counted apart: a gradient that
// flushed inside an fp16 step arrives as zero, so an fp32 run (or a high scale) shows what
// fp16 without scaling would lose.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ampc::rt::stats {

struct ClassFractions {
  double flush = 0, subnormal = 0, normal = 0, overflow = 0;  // of the non-zero elements
};

struct TensorSummary {
  std::string kind, tensor, node;
  int64_t depth = 0;
  int64_t records = 0;
  double elements = 0;             // summed over the records
  double zero = 0, nonfinite = 0;  // fractions of all elements
  double max_abs = 0;
  std::optional<double> min_nonzero_abs;
  std::map<int, double> exp_hist;  // floor(log2 |x|) -> count, summed over the records
  ClassFractions unscaled;         // pooled over the records
  ClassFractions at_scale;         // the last record, at its scale
  double last_scale = 1;
  int64_t last_step = 0;
};

struct ScaleProposal {
  // The smallest power of two that keeps kKeep of the non-zero gradient elements normal,
  // and the largest for which the largest |gradient| stays below 65504 / 2 (a factor 2 of
  // headroom); the proposal is min(smallest + 3, largest) when smallest <= largest.
  std::optional<int> smallest, largest, proposed;
  double normal_at_proposed = 0;  // fraction of the non-zero gradient elements
};

inline constexpr double kKeep = 0.999;

struct RangeReport {
  std::vector<TensorSummary> tensors;  // gradients, then activations, each in depth order
  ClassFractions gradients_at_1;       // pooled over every gradient element
  double gradient_max_abs = 0;
  ScaleProposal scale;
  bool scaling_needed = false;
  std::string verdict;
};

// Fractions of the non-zero elements of `hist` (floor(log2|x|) -> count) at scale 2^k;
// overflow counts the bins entirely above fp16's largest binade (2^16 and up).
ClassFractions fractions_at(const std::map<int, double>& hist, int k);

std::vector<nlohmann::json> read_jsonl(const std::string& path);
// Throws ampc::Error for records without the fields range_stats_log.h writes.
RangeReport analyze(const std::vector<nlohmann::json>& records);

std::string report_table(const RangeReport& r);  // report_text.cc
std::string report_text(const RangeReport& r);   // the table and the verdict

}  // namespace ampc::rt::stats
