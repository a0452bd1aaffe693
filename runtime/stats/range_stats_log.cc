#include "runtime/stats/range_stats_log.h"

#include <cmath>

#include "base/error.h"
#include "kernels/shared/range_stats.h"

namespace ampc::rt::stats {
namespace {

namespace rs = kernels::range_stats;

std::string attr_string(const plan::Step& s, const char* name) {
  for (const auto& a : s.attributes())
    if (a.name() == name && a.has_s()) return a.s();
  return {};
}

int64_t attr_int(const plan::Step& s, const char* name) {
  for (const auto& a : s.attributes())
    if (a.name() == name && a.has_i()) return a.i();
  return 0;
}

nlohmann::ordered_json classes(const double* counts, double numel) {
  auto f = [&](int c) { return numel > 0 ? counts[c] / numel : 0.0; };
  return {{"flush", f(rs::kFlush)},
          {"subnormal", f(rs::kSubnormal)},
          {"normal", f(rs::kNormal)},
          {"overflow", f(rs::kOverflow)}};
}

}  // namespace

std::vector<StatsTensor> stats_tensors(const plan::Plan& p) {
  std::vector<StatsTensor> result;
  for (const auto& s : p.steps()) {
    if (s.op() != "RangeStats" || s.domain() != "ampc" || s.outputs_size() != 1) continue;
    result.push_back({p.buffers(s.outputs(0)).name(), attr_string(s, "kind"),
                      attr_string(s, "tensor"), attr_string(s, "node"), attr_int(s, "depth")});
  }
  return result;
}

nlohmann::ordered_json stats_record(const StatsTensor& t, int64_t step, const double* s) {
  const double numel = s[rs::kNumel];
  nlohmann::ordered_json hist = nlohmann::ordered_json::object();
  for (int b = 0; b < rs::kHistBins; ++b) {
    if (s[rs::kHist + b] > 0)
      hist[std::to_string(rs::bin_exponent(b))] = static_cast<int64_t>(s[rs::kHist + b]);
  }
  const bool any_nonzero = s[rs::kMinNonzeroAbs] > 0;
  return {{"step", step},
          {"kind", t.kind},
          {"tensor", t.tensor},
          {"node", t.node},
          {"depth", t.depth},
          {"numel", static_cast<int64_t>(numel)},
          {"scale", s[rs::kScale]},
          {"max_abs", s[rs::kMaxAbs]},
          {"min_nonzero_abs", any_nonzero ? nlohmann::ordered_json(s[rs::kMinNonzeroAbs])
                                          : nlohmann::ordered_json(nullptr)},
          {"zero", numel > 0 ? s[rs::kTrueClass + rs::kZero] / numel : 0.0},
          {"nonfinite", numel > 0 ? s[rs::kTrueClass + rs::kNonFinite] / numel : 0.0},
          {"unscaled", classes(s + rs::kTrueClass, numel)},
          {"scaled", classes(s + rs::kScaledClass, numel)},
          {"exp_hist", hist}};
}

RangeStatsLog::RangeStatsLog(const plan::Plan& p, const std::string& path, int64_t every)
    : tensors_(stats_tensors(p)), every_(every) {
  if (every_ < 1) throw Error("--grad-stats-every must be at least 1");
  if (tensors_.empty())
    throw Error(
        "the plan computes no range statistics (compile it with them, or train the "
        "ONNX model with --grad-stats)");
  out_.open(path, std::ios::trunc);
  if (!out_) throw Error("cannot write '" + path + "'");
}

void RangeStatsLog::set_enabled(std::map<std::string, Tensor>& feeds, bool enabled) {
  Tensor flag(DType::kBool, {});
  flag.data<bool>()[0] = enabled;
  feeds.insert_or_assign(kStatsEnabledInput, std::move(flag));
}

void RangeStatsLog::write(int64_t step, const std::map<std::string, Tensor>& outputs) {
  for (const auto& t : tensors_) {
    const Tensor& s = outputs.at(t.output);
    if (s.dtype() != DType::kFloat64 || s.numel() != rs::kSize)
      throw Error("range statistics '" + t.output + "' are " + s.type_str() + ", expected f64[" +
                  std::to_string(rs::kSize) + "]");
    out_ << stats_record(t, step, s.data<double>()).dump() << '\n';
  }
  out_.flush();
}

}  // namespace ampc::rt::stats
