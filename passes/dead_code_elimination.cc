#include "passes/dead_code_elimination.h"

#include <algorithm>
#include <set>

namespace ampc::passes {

int eliminate_dead_code(ir::Model& model, const DeadCodeOptions&) {
  ir::Graph& g = *model.graph;
  std::set<const ir::Value*> outputs(g.outputs.begin(), g.outputs.end());
  for (const auto& u : model.state_updates) {
    outputs.insert(u.source);
    outputs.insert(u.target);
  }
  // Walk backwards so a chain of dead nodes goes in one sweep: a use by a node already found
  // dead does not count (its readers come after it), the nodes go in one removal at the end.
  std::vector<ir::Node*> dead;
  std::set<const ir::Node*> gone;
  auto read = [&](const ir::Value* v) {
    return std::any_of(v->uses.begin(), v->uses.end(),
                       [&](const ir::Use& u) { return !gone.count(u.node); });
  };
  for (size_t i = g.nodes.size(); i-- > 0;) {
    ir::Node* n = g.nodes[i].get();
    bool live = false;
    for (const ir::Value* v : n->outputs) live |= v && (outputs.count(v) || read(v));
    if (live) continue;
    dead.push_back(n);
    gone.insert(n);
  }
  const int removed = static_cast<int>(dead.size());
  g.remove_nodes(dead);
  // Initializers nobody reads (left over from folding, or unused in the model).
  std::erase_if(g.initializers, [&](ir::Value* v) {
    return v->uses.empty() && !v->is_graph_input && !outputs.count(v);
  });
  g.erase_values_if([&](const ir::Value& v) {
    return v.is_initializer() && v.uses.empty() && !v.is_graph_input && !outputs.count(&v);
  });
  return removed;
}

}  // namespace ampc::passes
