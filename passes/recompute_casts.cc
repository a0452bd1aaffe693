#include "passes/recompute_casts.h"

#include <algorithm>
#include <unordered_map>

#include "base/dtype.h"

namespace ampc::passes {
namespace {

bool narrowing_float_cast(const ir::Node& n) {
  if (n.op_type != "Cast" || !(n.domain.empty() || n.domain == "ai.onnx")) return false;
  if (n.inputs.size() != 1 || !n.inputs[0] || n.outputs.size() != 1 || !n.outputs[0]) return false;
  const DType from = n.inputs[0]->type.dtype, to = n.outputs[0]->type.dtype;
  return is_float(from) && is_float(to) && dtype_size(to) < dtype_size(from);
}

}  // namespace

int recompute_casts(ir::Model& model, const RecomputeCastsOptions& options) {
  ir::Graph& g = *model.graph;
  struct Plan {
    ir::Node* cast;
    std::vector<ir::Use> late;  // readers that read the recomputed copy
  };
  std::vector<Plan> plans;
  {
    std::unordered_map<const ir::Node*, int> pos;
    for (size_t i = 0; i < g.nodes.size(); ++i) pos[g.nodes[i].get()] = static_cast<int>(i);
    for (const auto& node : g.nodes) {
      ir::Node& c = *node;
      if (!narrowing_float_cast(c)) continue;
      const ir::Value* x = c.inputs[0];
      ir::Value* y = c.outputs[0];
      if (!x->producer || !y->type.is_static() || y->uses.size() < 2) continue;
      std::vector<ir::Use> uses = y->uses;
      if (std::any_of(uses.begin(), uses.end(),
                      [&](const ir::Use& u) { return !pos.count(u.node); }))
        continue;  // read by a subgraph
      std::sort(uses.begin(), uses.end(),
                [&](const ir::Use& a, const ir::Use& b) { return pos[a.node] < pos[b.node]; });
      int x_last = -1;
      for (const ir::Use& u : x->uses)
        x_last = std::max(x_last, pos.count(u.node) ? pos[u.node] : -1);
      // The first gap of at least min_gap nodes after which x is still read.
      int prev = pos[&c];
      for (size_t i = 0; i < uses.size(); ++i) {
        const int p = pos[uses[i].node];
        if (p - prev >= options.min_gap && i > 0 && x_last >= p) {
          plans.push_back({&c, std::vector<ir::Use>(uses.begin() + i, uses.end())});
          break;
        }
        prev = p;
      }
    }
  }
  for (const Plan& plan : plans) {
    ir::Node& c = *plan.cast;
    ir::Value* y = c.outputs[0];
    std::string name = y->name + std::string(kRecomputedSuffix);
    while (g.find_value(name)) name += "_";
    ir::Value* copy = g.add_value(name, y->type);
    // The recomputation runs just before its first reader (nodes stay topologically ordered).
    ir::Node* again = g.insert_node_before(plan.late.front().node, "Cast", {c.inputs[0]}, {copy},
                                           c.name + std::string(kRecomputedSuffix), c.domain);
    for (const ir::Attribute& a : c.attributes) {  // Cast's are integers ("to", "saturate")
      if (a.kind == ir::AttrKind::kInt)
        again->attributes.push_back(ir::Attribute::make_int(a.name, a.i));
    }
    // Readers move to the copy.
    for (const ir::Use& u : plan.late) ir::replace_use(u, copy);
  }
  return static_cast<int>(plans.size());
}

}  // namespace ampc::passes
