#include "ir/phase.h"

namespace ampc::ir {

void fill_unknown_phases(Graph& g) {
  // Readers come after their producers: walking backwards sees a reader's phase first.
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    Node& n = **it;
    if (n.phase != Phase::kUnknown) continue;
    for (const Value* out : n.outputs) {
      if (!out) continue;
      for (const Use& u : out->uses) {
        if (u.node->phase == Phase::kUnknown) continue;
        n.phase = u.node->phase;
        break;
      }
      if (n.phase != Phase::kUnknown) break;
    }
  }
  for (auto& n : g.nodes) {
    if (n->phase != Phase::kUnknown) continue;
    for (const Value* in : n->inputs) {
      if (in && in->producer && in->producer->phase != Phase::kUnknown) {
        n->phase = in->producer->phase;
        break;
      }
    }
  }
}

void set_phases_from_exported_names(Graph& g) {
  for (auto& n : g.nodes) {
    const std::string& name = n->name;
    n->phase = name.starts_with("grad/")        ? Phase::kBackward
               : name.starts_with("amp/")       ? Phase::kLossScaling
               : name.starts_with("optimizer/") ? Phase::kOptimizer
               : name.starts_with("stats/")     ? Phase::kStatistics
                                                : Phase::kForward;
  }
}

void set_phase(Graph& g, Phase phase) {
  for (auto& n : g.nodes) n->phase = phase;
  g.build_phase = phase;
}

}  // namespace ampc::ir
