#include "passes/dead_code_elimination.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <set>

#include "ops/schemas/ampc_schemas.h"

namespace ampc::passes {
namespace {

// Output k of an ampc-domain node may be left out when its schema says it is optional. Only
// this project's own ops: their kernels compute nothing for an omitted output (ConvGrad without
// dX skips the backward-data convolution). Some ONNX ops read their outputs' presence as a mode
// (BatchNormalization before opset 14 trains when its statistics outputs are there).
bool omittable_output(const ir::Node& n, size_t k) {
  if (n.domain != ops::kAmpcDomain) return false;
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(n.op_type, ops::kAmpcDomainVersion, n.domain);
  if (!schema || k >= schema->outputs().size()) return false;
  return schema->outputs()[k].GetOption() == onnx::OpSchema::Optional;
}

// Leaves out the optional outputs of the remaining ampc nodes that nobody reads (a ConvGrad's
// dX of the image input, its dB of a convolution without bias).
void drop_unread_outputs(ir::Graph& g, const std::set<const ir::Value*>& kept) {
  ops::register_ampc_schemas();
  std::set<const ir::Value*> dropped;
  for (const auto& n : g.nodes) {
    for (size_t k = 0; k < n->outputs.size(); ++k) {
      ir::Value* v = n->outputs[k];
      if (!v || !v->uses.empty() || kept.count(v) || !omittable_output(*n, k)) continue;
      ir::set_output(n.get(), k, nullptr);
      dropped.insert(v);
    }
  }
  g.erase_values_if([&](const ir::Value& v) { return dropped.count(&v) > 0; });
}

}  // namespace

std::set<const ir::Value*> kept_values(const ir::Model& model) {
  std::set<const ir::Value*> kept(model.graph->outputs.begin(), model.graph->outputs.end());
  for (const auto& u : model.state_updates) {
    kept.insert(u.source);
    kept.insert(u.target);
  }
  return kept;
}

int eliminate_dead_code(ir::Model& model, const DeadCodeOptions& options) {
  ir::Graph& g = *model.graph;
  const std::set<const ir::Value*> outputs = kept_values(model);
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
  drop_unread_outputs(g, outputs);
  if (options.keep_initializers) return removed;
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
