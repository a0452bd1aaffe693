// Axis ticks at round values: steps of 1, 2 or 5 times a power of ten, and an axis range
// widened to whole steps so that both ends carry a tick (25.75 / 50.5 / 75.25 become
// 0 / 20 / 40 / ...).
#pragma once

#include <string>
#include <vector>

namespace ampc::rt::stats {

struct AxisTicks {
  double lo = 0, hi = 1;  // the axis range: the first and the last tick
  double step = 1;
  std::vector<double> values;       // lo, lo + step, ..., hi
  std::vector<std::string> labels;  // each value with the decimals its step needs
};

// About `target` ticks (at least 2) covering [lo, hi]; integer_only: steps of at least 1
// (exponents of a log2 axis, step counts).
AxisTicks nice_ticks(double lo, double hi, int target = 5, bool integer_only = false);

}  // namespace ampc::rt::stats
