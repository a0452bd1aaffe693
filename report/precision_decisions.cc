#include "report/precision_decisions.h"

#include <string>
#include <unordered_map>

#include "passes/scalar_powers.h"

namespace ampc::report {

// Plan.precision_decisions: autocast's decision for each node still in the graph. The report
// names nodes by Node::label() and Casts by name; unnamed nodes are left out, as their label
// ("#index") may have changed since autocast ran. The products and square roots that compute
// a Pow by a constant (passes/scalar_powers.h) carry that Pow's decision.
void record_precision_decisions(const ir::Graph& g, const passes::AutocastReport& report,
                                plan::Plan& p) {
  std::unordered_map<std::string, const passes::AutocastReport::NodeDecision*> decided;
  for (const auto& d : report.nodes) decided[d.node] = &d;
  std::unordered_map<std::string, const passes::AutocastReport::InsertedCast*> casts;
  for (const auto& c : report.casts) casts[c.node] = &c;
  for (const auto& n : g.nodes) {
    if (n->name.empty()) continue;
    auto add = [&](DType dtype, const std::string& rule) {
      auto* d = p.add_precision_decisions();
      d->set_node(n->name);
      d->set_compute_dtype(static_cast<int32_t>(dtype));
      d->set_rule(rule);
    };
    if (auto it = decided.find(n->label()); it != decided.end()) {
      add(it->second->compute_dtype, it->second->rule);
    } else if (const std::string pow(passes::rewritten_pow(n->name));
               !pow.empty() && decided.count("'" + pow + "' (Pow)")) {
      const auto* d = decided.at("'" + pow + "' (Pow)");
      add(d->compute_dtype,
          d->rule + ", computing Pow '" + pow + "' as PyTorch does (passes/scalar_powers.h)");
    } else if (auto c = casts.find(n->name); c != casts.end() && n->op_type == "Cast") {
      add(c->second->to, "cast inserted by autocast");
    }
  }
}

}  // namespace ampc::report
