// fp16 range statistics compiled into the training step (`ampc train --grad-stats`,
// docs/amp-diagnostics.md): one ampc.RangeStats node per reported tensor, each a small graph
// output the trainer reads at its cadence.
//
//   ampc.RangeStats(x, enabled, [scale]) -> stats (f64[kernels::range_stats::kSize])
//       max |x|, smallest non-zero |x|, counts of zero / fp16-flushing / fp16-subnormal /
//       normal / overflowing / non-finite elements of x and of x * scale, and a histogram of
//       the binary exponents of x (layout: kernels/shared/range_stats.h). `enabled` (a bool
//       scalar, the plan input "stats.enabled") false: nothing is read, the result is zeros.
//       Attributes (for the log and the report, not the math): kind ("gradient" or
//       "activation"), tensor (the parameter or the value), node (the ONNX node of the layer),
//       depth (that node's index in the forward graph).
//
// What is reported: the unscaled gradient of every trained parameter (after
// ampc.UnscaleCheck when the loss is scaled, before clipping), at the scale the step used;
// with activations, every float output of a forward node but Casts (scale 1). Each node is
// placed right after the producer of its tensor, so no tensor lives longer than before but
// by that one read.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/autodiff/autodiff.h"

namespace ampc::passes {

inline constexpr const char* kRangeStatsOp = "RangeStats";
inline constexpr const char* kStatsEnabledName = "stats.enabled";  // plan input, bool scalar

struct RangeStatsOptions {
  bool gradients = false;
  bool activations = false;
  bool any() const { return gradients || activations; }
};

// One tensor to report, by the name of its value (names survive the cleanup passes that
// run between the training build and the insertion).
struct RangeStatsTarget {
  std::string value;
  std::string kind;    // "gradient" | "activation"
  std::string tensor;  // the parameter (gradients) or the value (activations)
  std::string node;    // the ONNX node of the layer
  int64_t depth = 0;   // index of that node in the forward graph
};

// What to report, called after unscale_and_check: the first `forward_nodes` nodes of the
// graph are the forward pass. For every gradient (parameter, unscaled gradient), its layer is
// the first forward node that reads the parameter (through Casts and layout ops); with
// `activations`, every float output of a forward node but Casts and Constants.
std::vector<RangeStatsTarget> stats_targets(const ir::Model& model, size_t forward_nodes,
                                            const std::vector<ParameterGradient>& gradients,
                                            const RangeStatsOptions& options);

// Adds the graph input kStatsEnabledName and one RangeStats node per target (scale: the value
// "amp.scale" when the step has one), each output a graph output named
// "stats.<kind>.<tensor>". A gradient whose value no longer exists is an internal error; a
// missing activation (removed by cleanup) is skipped.
void add_range_stats(ir::Model& model, const std::vector<RangeStatsTarget>& targets);

}  // namespace ampc::passes
