// The text of `ampc report`: the per-tensor table in depth order and the verdict.
#include <cmath>
#include <cstdio>

#include "base/number_format.h"
#include "runtime/stats/range_report.h"

namespace ampc::rt::stats {
namespace {

std::string pct(double f) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.2f", 100 * f);
  return buf;
}

std::string range(const TensorSummary& t) {
  char buf[64];
  if (!t.min_nonzero_abs) return "all zero";
  std::snprintf(buf, sizeof buf, "%.2e .. %.2e", *t.min_nonzero_abs, t.max_abs);
  return buf;
}

std::string scale_text(double s) {
  char buf[32];
  const double l = std::log2(s);
  if (s > 0 && l == std::floor(l)) {
    std::snprintf(buf, sizeof buf, "2^%d", static_cast<int>(l));
  } else {
    return format_number(s);
  }
  return buf;
}

}  // namespace

std::string report_table(const RangeReport& r) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-5s %-34s %-26s %-22s %7s %9s %9s %9s %-8s %9s\n", "depth",
                "layer (ONNX node)", "tensor", "|x| range (non-zero)", "zero%", "normal%", "flush%",
                "subn%", "scale", "normal%");
  out += line;
  std::snprintf(line, sizeof line, "%-5s %-34s %-26s %-22s %7s %29s %-8s %9s\n", "", "", "", "", "",
                "(fp16, unscaled)", "", "(at it)");
  out += line;
  std::string kind;
  for (const auto& t : r.tensors) {
    if (t.kind != kind) {
      kind = t.kind;
      out += kind == "gradient" ? "gradients (unscaled fp32), pooled over " +
                                      std::to_string(t.records) + " recorded steps:\n"
                                : "activations:\n";
    }
    auto cut = [](const std::string& s, size_t n) {
      return s.size() <= n ? s : "..." + s.substr(s.size() - (n - 3));
    };
    std::snprintf(line, sizeof line, "%-5lld %-34s %-26s %-22s %7s %9s %9s %9s %-8s %9s\n",
                  static_cast<long long>(t.depth), cut(t.node, 34).c_str(),
                  cut(t.tensor, 26).c_str(), range(t).c_str(), pct(t.zero).c_str(),
                  pct(t.unscaled.normal).c_str(), pct(t.unscaled.flush).c_str(),
                  pct(t.unscaled.subnormal).c_str(), scale_text(t.last_scale).c_str(),
                  pct(t.at_scale.normal).c_str());
    out += line;
  }
  return out;
}

std::string report_text(const RangeReport& r) {
  return report_table(r) + "\nverdict: " + r.verdict + "\n";
}

}  // namespace ampc::rt::stats
