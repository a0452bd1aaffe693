#include "passes/range_stats.h"

#include <algorithm>
#include <map>
#include <set>

#include "base/error.h"
#include "kernels/shared/range_stats.h"
#include "ops/op_info.h"
#include "ops/schemas/ampc_schemas.h"
#include "passes/loss_scaling.h"

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;

// Ops that only carry a parameter to its layer (autocast's Cast, exporters' Transpose).
bool passes_through(const Node& n) {
  return n.domain.empty() && (n.op_type == "Cast" || ops::op_info("", n.op_type).moves_elements);
}

}  // namespace

std::vector<RangeStatsTarget> stats_targets(const ir::Model& model, size_t forward_nodes,
                                            const std::vector<ParameterGradient>& gradients,
                                            const RangeStatsOptions& options) {
  const auto& nodes = model.graph->nodes;
  forward_nodes = std::min(forward_nodes, nodes.size());
  std::map<const Node*, int64_t> depth;
  for (size_t i = 0; i < forward_nodes; ++i) depth[nodes[i].get()] = static_cast<int64_t>(i);
  std::vector<RangeStatsTarget> targets;
  if (options.gradients) {
    for (const auto& pg : gradients) {
      // The first forward node that reads the parameter, through pass-through ops.
      const Node* layer = nullptr;
      std::vector<const Value*> frontier{pg.parameter};
      while (!frontier.empty()) {
        const Value* v = frontier.back();
        frontier.pop_back();
        for (const auto& use : v->uses) {
          auto it = depth.find(use.node);
          if (it == depth.end()) continue;
          if (passes_through(*use.node)) {
            for (const Value* o : use.node->outputs)
              if (o) frontier.push_back(o);
          } else if (!layer || it->second < depth[layer]) {
            layer = use.node;
          }
        }
      }
      targets.push_back({pg.gradient->name, "gradient", pg.parameter->name,
                         layer ? layer->name : pg.parameter->name, layer ? depth[layer] : -1});
    }
  }
  if (options.activations) {
    for (size_t i = 0; i < forward_nodes; ++i) {
      const Node& n = *nodes[i];
      if (n.op_type == "Cast" || n.op_type == "Constant") continue;
      for (const Value* o : n.outputs) {
        if (!o || !is_float(o->type.dtype) || !o->type.is_static()) continue;
        targets.push_back({o->name, "activation", o->name, n.name, static_cast<int64_t>(i)});
      }
    }
  }
  return targets;
}

void add_range_stats(ir::Model& model, const std::vector<RangeStatsTarget>& targets) {
  if (targets.empty()) return;
  ir::Graph& g = *model.graph;
  if (g.find_value(kStatsEnabledName))
    throw Error(std::string("the model already has a value named '") + kStatsEnabledName + "'");
  Value* enabled = g.add_value(kStatsEnabledName, {DType::kBool, std::vector<int64_t>{}});
  enabled->is_graph_input = true;
  g.inputs.push_back(enabled);
  Value* scale = g.find_value(kScaleName);
  bool uses_domain = false;
  for (const auto& t : targets) {
    Value* x = g.find_value(t.value);
    if (!x) {
      if (t.kind == "gradient")
        throw Error("internal: the gradient '" + t.value + "' of parameter '" + t.tensor +
                    "' is gone before the range statistics are added");
      continue;
    }
    const std::string name = "stats." + t.kind + "." + t.tensor;
    if (g.find_value(name)) continue;  // one report per tensor
    Value* out =
        g.add_value(name, {DType::kFloat64, std::vector<int64_t>{kernels::range_stats::kSize}});
    std::vector<Value*> inputs{x, enabled};
    if (t.kind == "gradient" && scale) inputs.push_back(scale);
    // Right after the producer of x (and of the scale), so x lives no longer than it did.
    const Node* last = nullptr;
    for (const auto& p : g.nodes) {
      if (p.get() == x->producer || (scale && p.get() == scale->producer && inputs.size() > 2))
        last = p.get();
    }
    Node* n = g.insert_node_after(last, kRangeStatsOp, inputs, {out},
                                  "stats/" + t.kind + "/" + t.tensor, ops::kAmpcDomain);
    n->attributes.push_back(ir::Attribute::make_string("kind", t.kind));
    n->attributes.push_back(ir::Attribute::make_string("tensor", t.tensor));
    n->attributes.push_back(ir::Attribute::make_string("node", t.node));
    n->attributes.push_back(ir::Attribute::make_int("depth", t.depth));
    g.outputs.push_back(out);
    uses_domain = true;
  }
  if (uses_domain && !model.opset_version(ops::kAmpcDomain))
    model.opsets.push_back({ops::kAmpcDomain, ops::kAmpcDomainVersion});
}

}  // namespace ampc::passes
