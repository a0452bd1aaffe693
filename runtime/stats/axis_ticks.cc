#include "runtime/stats/axis_ticks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ampc::rt::stats {
namespace {

// The smallest of 1, 2, 5, 10 times a power of ten that is at least `raw`.
double nice_step(double raw) {
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw * (1 - 1e-9)) return m * mag;
  }
  return 10 * mag;
}

}  // namespace

AxisTicks nice_ticks(double lo, double hi, int target, bool integer_only) {
  AxisTicks t;
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) lo -= 1, hi += 1;
  target = std::max(target, 2);
  t.step = nice_step((hi - lo) / target);
  if (integer_only) t.step = std::max(t.step, 1.0);
  // Whole steps (a small tolerance keeps 0.3 / 0.1 from becoming 2.9999...).
  const double first = std::floor(lo / t.step + 1e-9), last = std::ceil(hi / t.step - 1e-9);
  t.lo = first * t.step;
  t.hi = last * t.step;
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(t.step) + 1e-9)));
  for (double k = first; k <= last; ++k) {
    double v = k * t.step;
    if (std::abs(v) < t.step * 1e-9) v = 0;  // no "-0"
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    t.values.push_back(v);
    t.labels.push_back(buf);
  }
  return t;
}

}  // namespace ampc::rt::stats
