#include "compiler/report/precision_report.h"

#include <sstream>

namespace ampc::report {
namespace {

std::string dtype_or_dash(DType t) {
  return t == DType::kUndefined ? "-" : std::string(dtype_name(t));
}

struct Totals {
  int64_t low = 0, fp32 = 0, parameter_casts = 0;
};

Totals totals_of(const passes::AutocastReport& r) {
  Totals t;
  for (const auto& n : r.nodes) {
    if (n.compute_dtype == DType::kFloat16 || n.compute_dtype == DType::kBFloat16) ++t.low;
    if (n.compute_dtype == DType::kFloat32) ++t.fp32;
  }
  for (const auto& c : r.casts) t.parameter_casts += c.parameter;
  return t;
}

}  // namespace

nlohmann::ordered_json precision_report_json(const passes::AutocastReport& r) {
  nlohmann::ordered_json j;
  j["precision"] = r.precision;
  j["nodes"] = nlohmann::ordered_json::array();
  for (const auto& n : r.nodes) {
    j["nodes"].push_back({{"node", n.node},
                          {"op", n.op_type},
                          {"compute_dtype", dtype_or_dash(n.compute_dtype)},
                          {"rule", n.rule}});
  }
  j["casts"] = nlohmann::ordered_json::array();
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
  // The loss-scaling subgraph (scale, found_inf, skip-step) is reported here by the
  // loss-scaling pass once it exists; null means "not part of this report".
  j["loss_scaling"] = nullptr;
  return j;
}

std::string precision_report_text(const passes::AutocastReport& r, const std::string& title) {
  std::ostringstream o;
  o << title << ": precision " << r.precision << "\n\nnodes (" << r.nodes.size() << "):\n";
  for (const auto& n : r.nodes) {
    o << "  " << n.node << "  " << dtype_or_dash(n.compute_dtype) << "  " << n.rule << "\n";
  }
  o << "\ninserted casts (" << r.casts.size() << "):\n";
  for (const auto& c : r.casts) {
    o << "  " << c.value << "  " << dtype_name(c.from) << " -> " << dtype_name(c.to) << "  ";
    if (c.bytes_moved < 0) {
      o << "? bytes/step (shape not static)";
    } else {
      o << c.bytes_moved << " bytes/step";
    }
    o << (c.parameter ? "  (parameter)" : "") << "\n";
  }
  const Totals t = totals_of(r);
  o << "\ntotals: " << r.nodes.size() << " nodes (" << t.low << " in 16-bit, " << t.fp32
    << " in f32), " << r.casts.size() << " casts (" << t.parameter_casts << " of parameters), "
    << r.total_cast_bytes() << " bytes moved by casts per step\n";
  for (const auto& n : r.notes) o << "note: " << n << "\n";
  // Loss scaling: reported by the loss-scaling pass (not yet part of this report).
  return o.str();
}

}  // namespace ampc::report
