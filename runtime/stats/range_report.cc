#include "runtime/stats/range_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "base/error.h"

namespace ampc::rt::stats {
namespace {

// fp16's classes by binary exponent x + k of a binade [2^(x+k), 2^(x+k+1)).
bool flushes(int e) {
  return e <= -25;
}
bool subnormal(int e) {
  return e >= -24 && e <= -15;
}
bool overflows(int e) {
  return e >= 16;
}

ClassFractions pooled(double flush, double sub, double normal, double over) {
  const double n = flush + sub + normal + over;
  if (n <= 0) return {};
  return {flush / n, sub / n, normal / n, over / n};
}

ClassFractions record_classes(const nlohmann::json& c, double nonzero_share) {
  if (nonzero_share <= 0) return {};
  return {
      c.at("flush").get<double>() / nonzero_share, c.at("subnormal").get<double>() / nonzero_share,
      c.at("normal").get<double>() / nonzero_share, c.at("overflow").get<double>() / nonzero_share};
}

std::string percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, f >= 0.001 || f == 0 ? "%.2f%%" : "%.2g%%", 100 * f);
  return buf;
}

std::string layer_list(const std::vector<std::string>& names) {
  std::string s;
  const size_t shown = std::min<size_t>(names.size(), 5);
  for (size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > shown) s += " and " + std::to_string(names.size() - shown) + " more";
  return s;
}

ScaleProposal propose(const std::map<int, double>& hist, double max_abs) {
  ScaleProposal p;
  if (hist.empty()) return p;
  for (int k = -64; k <= 64; ++k) {
    if (fractions_at(hist, k).normal >= kKeep) {
      p.smallest = k;
      break;
    }
  }
  if (max_abs > 0) p.largest = static_cast<int>(std::floor(std::log2(65504.0 / 2 / max_abs)));
  if (p.smallest && p.largest && *p.smallest <= *p.largest) {
    p.proposed = std::min(*p.smallest + 3, *p.largest);
    p.normal_at_proposed = fractions_at(hist, *p.proposed).normal;
  }
  return p;
}

std::string verdict(const RangeReport& r) {
  const ScaleProposal& p = r.scale;
  if (r.gradient_max_abs == 0)
    return "no non-zero gradient element was recorded: nothing to decide";
  const ClassFractions& g = r.gradients_at_1;
  std::vector<std::string> lost;  // layers that lose more than 1 - kKeep at scale 1
  for (const auto& t : r.tensors) {
    if (t.kind == "gradient" && t.unscaled.flush + t.unscaled.subnormal > 1 - kKeep &&
        std::find(lost.begin(), lost.end(), t.node) == lost.end())
      lost.push_back(t.node);
  }
  std::string s;
  char buf[160];
  if (!r.scaling_needed) {
    s = "loss scaling not needed: " + percent(g.normal) +
        " of the non-zero gradient elements are in fp16's normal range at scale 1";
    if (g.overflow > 0) s += ", but " + percent(g.overflow) + " overflow";
    return s;
  }
  s = "loss scaling needed: " + percent(g.flush) + " of the non-zero gradient elements flush to " +
      "zero in fp16 at scale 1 and " + percent(g.subnormal) + " are subnormal (layers " +
      layer_list(lost) + ")";
  if (p.proposed) {
    std::snprintf(buf, sizeof buf, "%.6g", std::ldexp(1.0, *p.proposed));
    s += "; a static scale of 2^" + std::to_string(*p.proposed) + " (" + buf + ") keeps " +
         percent(p.normal_at_proposed) + " representable without overflow";
    std::snprintf(buf, sizeof buf, "%.3g -> %.3g", r.gradient_max_abs,
                  std::ldexp(r.gradient_max_abs, *p.proposed));
    s += " (largest |gradient| " + std::string(buf) + "): --loss-scale static:" +
         std::to_string(static_cast<long long>(std::ldexp(1.0, *p.proposed)));
  } else if (p.smallest && p.largest) {
    s += "; no static scale fits: keeping " + percent(kKeep) + " normal needs 2^" +
         std::to_string(*p.smallest) + ", the largest gradient allows at most 2^" +
         std::to_string(*p.largest) + " (use dynamic scaling, or bf16)";
  }
  return s;
}

}  // namespace

ClassFractions fractions_at(const std::map<int, double>& hist, int k) {
  double f = 0, s = 0, n = 0, o = 0;
  for (const auto& [x, count] : hist) {
    const int e = x + k;
    (flushes(e) ? f : subnormal(e) ? s : overflows(e) ? o : n) += count;
  }
  return pooled(f, s, n, o);
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read '" + path + "'");
  std::vector<nlohmann::json> records;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    try {
      records.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception& e) {
      throw Error(path + ":" + std::to_string(n) + ": not JSON: " + e.what());
    }
  }
  return records;
}

RangeReport analyze(const std::vector<nlohmann::json>& records) {
  RangeReport r;
  std::map<std::pair<std::string, std::string>, TensorSummary> by_tensor;
  std::map<int, double> gradient_hist;
  double gf = 0, gs = 0, gn = 0, go = 0;  // pooled gradient class counts at scale 1
  for (const auto& j : records) {
    try {
      const std::string kind = j.at("kind"), tensor = j.at("tensor");
      TensorSummary& t = by_tensor[{kind, tensor}];
      t.kind = kind;
      t.tensor = tensor;
      t.node = j.at("node");
      t.depth = j.at("depth");
      const double numel = j.at("numel").get<double>();
      const double zero = j.at("zero").get<double>(), nonfinite = j.at("nonfinite").get<double>();
      const double nonzero_share = 1 - zero - nonfinite;
      t.zero = (t.zero * t.elements + zero * numel) / std::max(t.elements + numel, 1.0);
      t.nonfinite =
          (t.nonfinite * t.elements + nonfinite * numel) / std::max(t.elements + numel, 1.0);
      const auto& u = j.at("unscaled");
      t.elements += numel;
      t.records += 1;
      t.max_abs = std::max(t.max_abs, j.at("max_abs").get<double>());
      if (!j.at("min_nonzero_abs").is_null()) {
        const double m = j.at("min_nonzero_abs");
        t.min_nonzero_abs = t.min_nonzero_abs ? std::min(*t.min_nonzero_abs, m) : m;
      }
      for (const auto& [e, c] : j.at("exp_hist").items())
        t.exp_hist[std::stoi(e)] += c.get<double>();
      const int64_t step = j.at("step");
      if (step >= t.last_step) {
        t.last_step = step;
        t.last_scale = j.at("scale");
        t.at_scale = record_classes(j.at("scaled"), nonzero_share);
      }
      if (kind == "gradient") {
        gf += u.at("flush").get<double>() * numel;
        gs += u.at("subnormal").get<double>() * numel;
        gn += u.at("normal").get<double>() * numel;
        go += u.at("overflow").get<double>() * numel;
        for (const auto& [e, c] : j.at("exp_hist").items())
          gradient_hist[std::stoi(e)] += c.get<double>();
        r.gradient_max_abs = std::max(r.gradient_max_abs, j.at("max_abs").get<double>());
      }
    } catch (const nlohmann::json::exception& e) {
      throw Error(std::string("not a --grad-stats record: ") + e.what());
    }
  }
  for (auto& [key, t] : by_tensor) {
    t.unscaled = fractions_at(t.exp_hist, 0);
    r.tensors.push_back(std::move(t));
  }
  std::stable_sort(r.tensors.begin(), r.tensors.end(), [](const auto& a, const auto& b) {
    if (a.kind != b.kind) return a.kind == "gradient";
    return a.depth < b.depth;
  });
  r.gradients_at_1 = pooled(gf, gs, gn, go);
  r.scale = propose(gradient_hist, r.gradient_max_abs);
  r.scaling_needed = r.gradients_at_1.flush + r.gradients_at_1.subnormal > 1 - kKeep;
  r.verdict = verdict(r);
  return r;
}

}  // namespace ampc::rt::stats
