#include "passes/dead_code_elimination.h"

#include <set>

namespace ampc::passes {

int eliminate_dead_code(ir::Model& model, const DeadCodeOptions&) {
  ir::Graph& g = *model.graph;
  std::set<const ir::Value*> outputs(g.outputs.begin(), g.outputs.end());
  for (const auto& u : model.state_updates) {
    outputs.insert(u.source);
    outputs.insert(u.target);
  }
  int removed = 0;
  // Walk backwards so a chain of dead nodes goes in one sweep.
  for (size_t i = g.nodes.size(); i-- > 0;) {
    ir::Node* n = g.nodes[i].get();
    bool live = false;
    for (const ir::Value* v : n->outputs) live |= v && (!v->uses.empty() || outputs.count(v));
    if (!live) {
      g.remove_node(n);
      ++removed;
    }
  }
  // Initializers nobody reads (left over from folding, or unused in the model).
  std::erase_if(g.initializers, [&](ir::Value* v) {
    return v->uses.empty() && !v->is_graph_input && !outputs.count(v);
  });
  std::erase_if(g.values, [&](const std::unique_ptr<ir::Value>& v) {
    return v->is_initializer() && v->uses.empty() && !v->is_graph_input && !outputs.count(v.get());
  });
  return removed;
}

}  // namespace ampc::passes
