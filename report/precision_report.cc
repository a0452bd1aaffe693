#include "report/precision_report.h"

#include <sstream>

#include <type_traits>
#include "base/error.h"

namespace ampc::report {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string dtype_or_dash(DType t) {
  return t == DType::kUndefined ? "-" : std::string(dtype_name(t));
}

struct Totals {
  int64_t low = 0, fp32 = 0, parameter_casts = 0;
};

Totals totals_of(const PrecisionReport& r) {
  Totals t;
  for (const auto& n : r.nodes) {
    if (n.compute_dtype == DType::kFloat16 || n.compute_dtype == DType::kBFloat16) ++t.low;
    if (n.compute_dtype == DType::kFloat32) ++t.fp32;
  }
  for (const auto& c : r.casts) t.parameter_casts += c.parameter;
  return t;
}

template <typename T>
ordered_json or_null(const std::optional<T>& v) {
  return v ? ordered_json(*v) : ordered_json(nullptr);
}

ordered_json loss_scaling_json(const LossScalingReport& s) {
  ordered_json ops = ordered_json::array();
  for (const auto& op : s.ops) ops.push_back({{"node", op.node}, {"op", op.op}});
  return {{"mode", s.mode},
          {"init_scale", or_null(s.init_scale)},
          {"init_growth_tracker", or_null(s.init_growth_tracker)},
          {"growth_factor", or_null(s.growth_factor)},
          {"backoff_factor", or_null(s.backoff_factor)},
          {"growth_interval", or_null(s.growth_interval)},
          {"min_scale", or_null(s.min_scale)},
          {"max_scale", or_null(s.max_scale)},
          {"grad_norm", s.grad_norm},
          {"clip_grad_norm", or_null(s.clip_grad_norm)},
          {"ops", ops},
          {"guarded_updates", s.guarded_states.size()},
          {"state_updates", s.state_updates},
          {"guarded_states", s.guarded_states},
          {"guarded_copies", s.guarded_copies}};
}

// "2", "0.5", "65536": the shortest form that reads back as the same double.
std::string number(double v) {
  std::string s;
  for (int digits = 1; digits <= 17; ++digits) {
    std::ostringstream o;
    o.precision(digits);
    o << v;
    s = o.str();
    if (std::stod(s) == v) break;
  }
  return s;
}

template <typename T>
std::string or_dash(const std::optional<T>& v) {
  if (!v) return "-";
  if constexpr (std::is_floating_point_v<T>) {
    return number(*v);
  } else {
    return std::to_string(*v);
  }
}

void loss_scaling_text(const LossScalingReport& s, std::ostream& o) {
  o << "\nloss scaling: " << s.mode
    << (s.mode == "none" ? " (no scale; non-finite gradients are still checked and skipped)" : "")
    << "\n";
  if (s.mode != "none") {
    o << "  scale amp.scale: initial " << or_dash(s.init_scale);
    if (s.mode == "dynamic")
      o << ", growth tracker amp.growth_tracker: initial " << or_dash(s.init_growth_tracker);
    o << "\n";
  }
  if (s.mode == "dynamic") {
    o << "  growth factor " << or_dash(s.growth_factor) << ", backoff factor "
      << or_dash(s.backoff_factor) << ", growth interval " << or_dash(s.growth_interval)
      << ", min scale " << or_dash(s.min_scale) << ", max scale " << or_dash(s.max_scale) << "\n";
  }
  o << "  clipping: "
    << (s.clip_grad_norm ? "max norm " + number(*s.clip_grad_norm)
        : s.grad_norm    ? "off (norm computed for the log)"
                         : "off")
    << "\n  ops:\n";
  for (const auto& op : s.ops) o << "    " << op.node << "  " << op.op << "\n";
  o << "  skip-step: " << s.guarded_states.size() << " of " << s.state_updates
    << " state updates guarded by amp.found_inf (Where: a skipped step keeps their bits)\n";
  for (const auto& name : s.guarded_states) o << "    " << name << "\n";
  if (s.guarded_copies > 0)
    o << "  and the " << s.guarded_copies << " 16-bit weight copies the optimizer writes\n";
}

}  // namespace

int64_t PrecisionReport::total_cast_bytes() const {
  int64_t total = 0;
  for (const auto& c : casts) total += c.bytes_moved < 0 ? 0 : c.bytes_moved;
  return total;
}

PrecisionReport from_autocast(const passes::AutocastReport& a) {
  PrecisionReport r;
  r.precision = a.precision;
  r.source = "autocast";
  for (const auto& n : a.nodes) r.nodes.push_back({n.node, n.op_type, n.compute_dtype, n.rule});
  r.casts = a.casts;
  r.notes = a.notes;
  return r;
}

ordered_json precision_report_json(const PrecisionReport& r) {
  ordered_json j;
  j["precision"] = r.precision;
  j["source"] = r.source;
  j["nodes"] = ordered_json::array();
  for (const auto& n : r.nodes) {
    ordered_json node = {{"node", n.node},
                         {"op", n.op},
                         {"compute_dtype", dtype_or_dash(n.compute_dtype)},
                         {"rule", n.rule}};
    if (n.step >= 0) node["step"] = n.step;
    j["nodes"].push_back(std::move(node));
  }
  j["casts"] = ordered_json::array();
  for (const auto& c : r.casts) {
    j["casts"].push_back({{"node", c.node},
                          {"value", c.value},
                          {"from", dtype_name(c.from)},
                          {"to", dtype_name(c.to)},
                          {"numel", c.numel},
                          {"bytes_per_step", c.bytes_moved},
                          {"parameter", c.parameter}});
  }
  const Totals t = totals_of(r);
  j["totals"] = {{"nodes", r.nodes.size()},
                 {"nodes_low", t.low},
                 {"nodes_fp32", t.fp32},
                 {"casts", r.casts.size()},
                 {"parameter_casts", t.parameter_casts},
                 {"cast_bytes_per_step", r.total_cast_bytes()}};
  j["notes"] = r.notes;
  // null: no loss scaling in this step (a forward graph, fp32/bf16 without checks, or a
  // source model before compilation).
  j["loss_scaling"] = r.loss_scaling ? loss_scaling_json(*r.loss_scaling) : ordered_json(nullptr);
  return j;
}

std::string precision_report_text(const PrecisionReport& r, const std::string& title) {
  std::ostringstream o;
  const bool steps = r.source == "plan";
  o << title << ": precision " << r.precision << " (" << r.source << ")\n\n"
    << (steps ? "steps (" : "nodes (") << r.nodes.size() << "):\n";
  for (const auto& n : r.nodes) {
    o << "  ";
    if (n.step >= 0) o << "#" << n.step << "  ";
    o << n.node << "  " << n.op << "  " << dtype_or_dash(n.compute_dtype) << "  " << n.rule << "\n";
  }
  o << "\ncasts (" << r.casts.size() << "):\n";
  for (const auto& c : r.casts) {
    o << "  " << c.node << "  " << c.value << "  " << dtype_name(c.from) << " -> "
      << dtype_name(c.to) << "  ";
    if (c.bytes_moved < 0) {
      o << "? bytes/step (shape not static)";
    } else {
      o << c.bytes_moved << " bytes/step";
    }
    o << (c.parameter ? "  (parameter)" : "") << "\n";
  }
  const Totals t = totals_of(r);
  o << "\ntotals: " << r.nodes.size() << (steps ? " steps (" : " nodes (") << t.low
    << " in 16-bit, " << t.fp32 << " in f32), " << r.casts.size() << " casts (" << t.parameter_casts
    << " of parameters), " << r.total_cast_bytes() << " bytes moved by casts per step\n";
  for (const auto& n : r.notes) o << "note: " << n << "\n";
  if (r.loss_scaling) {
    loss_scaling_text(*r.loss_scaling, o);
  } else {
    o << "\nloss scaling: not in this step\n";
  }
  return o.str();
}

namespace {

DType dtype_or_undefined(const std::string& name) {
  if (name == "-") return DType::kUndefined;
  if (auto t = dtype_from_name(name)) return *t;
  throw Error("precision report: unknown dtype '" + name + "'");
}

template <typename T>
std::optional<T> optional_of(const nlohmann::json& j) {
  return j.is_null() ? std::nullopt : std::optional<T>(j.get<T>());
}

}  // namespace

PrecisionReport precision_report_from_json(const nlohmann::json& j) {
  try {
    PrecisionReport r;
    r.precision = j.at("precision").get<std::string>();
    r.source = j.at("source").get<std::string>();
    for (const auto& n : j.at("nodes")) {
      r.nodes.push_back({n.at("node").get<std::string>(), n.at("op").get<std::string>(),
                         dtype_or_undefined(n.at("compute_dtype").get<std::string>()),
                         n.at("rule").get<std::string>(), n.value("step", int64_t{-1})});
    }
    for (const auto& c : j.at("casts")) {
      PrecisionReport::Cast cast;
      cast.node = c.at("node").get<std::string>();
      cast.value = c.at("value").get<std::string>();
      cast.from = dtype_or_undefined(c.at("from").get<std::string>());
      cast.to = dtype_or_undefined(c.at("to").get<std::string>());
      cast.numel = c.at("numel").get<int64_t>();
      cast.bytes_moved = c.at("bytes_per_step").get<int64_t>();
      cast.parameter = c.at("parameter").get<bool>();
      r.casts.push_back(std::move(cast));
    }
    r.notes = j.at("notes").get<std::vector<std::string>>();
    const auto& s = j.at("loss_scaling");
    if (!s.is_null()) {
      LossScalingReport l;
      l.mode = s.at("mode").get<std::string>();
      l.init_scale = optional_of<double>(s.at("init_scale"));
      l.init_growth_tracker = optional_of<int64_t>(s.at("init_growth_tracker"));
      l.growth_factor = optional_of<double>(s.at("growth_factor"));
      l.backoff_factor = optional_of<double>(s.at("backoff_factor"));
      l.growth_interval = optional_of<int64_t>(s.at("growth_interval"));
      l.min_scale = optional_of<double>(s.at("min_scale"));
      l.max_scale = optional_of<double>(s.at("max_scale"));
      l.grad_norm = s.at("grad_norm").get<bool>();
      l.clip_grad_norm = optional_of<double>(s.at("clip_grad_norm"));
      for (const auto& op : s.at("ops"))
        l.ops.push_back({op.at("node").get<std::string>(), op.at("op").get<std::string>()});
      l.guarded_states = s.at("guarded_states").get<std::vector<std::string>>();
      l.state_updates = s.at("state_updates").get<int64_t>();
      l.guarded_copies = s.value("guarded_copies", int64_t{0});
      r.loss_scaling = std::move(l);
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("precision report: ") + e.what());
  }
}

}  // namespace ampc::report
