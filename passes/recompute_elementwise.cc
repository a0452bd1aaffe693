#include "passes/recompute_elementwise.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/dtype.h"
#include "passes/recompute_casts.h"

namespace ampc::passes {
namespace {

// Float arithmetic of the default domain without attributes, and Casts between float types:
// what a fused kernel computes in a few instructions per element.
bool cheap_elementwise(const ir::Node& n) {
  static const std::unordered_set<std::string> kOps = {
      "Add",  "Sub",     "Mul",  "Div",  "Neg",        "Abs", "Exp", "Log", "Erf",
      "Tanh", "Sigmoid", "Relu", "Sqrt", "Reciprocal", "Pow", "Max", "Min"};
  if (!(n.domain.empty() || n.domain == "ai.onnx") || n.outputs.size() != 1 || !n.outputs[0])
    return false;
  if (!n.outputs[0]->type.is_static()) return false;
  if (!std::all_of(n.inputs.begin(), n.inputs.end(), [](const ir::Value* v) { return v; }))
    return false;
  if (n.op_type == "Cast") {  // its attributes are integers ("to", "saturate")
    return n.inputs.size() == 1 && is_float(n.inputs[0]->type.dtype) &&
           is_float(n.outputs[0]->type.dtype) &&
           std::all_of(n.attributes.begin(), n.attributes.end(),
                       [](const ir::Attribute& a) { return a.kind == ir::AttrKind::kInt; });
  }
  return kOps.count(n.op_type) && n.attributes.empty();
}

class Recomputer {
 public:
  Recomputer(ir::Model& model, const RecomputeElementwiseOptions& options)
      : g_(*model.graph), o_(options) {
    for (const auto& u : model.state_updates) state_.insert(u.target);
    for (const auto& u : model.state_updates) live_to_end_.insert(u.source);
    for (const ir::Value* v : g_.outputs) live_to_end_.insert(v);
  }

  // Only these nodes are recomputed, and these values may be kept longer than before
  // (recompute_low_chains).
  void restrict_to(std::unordered_set<std::string> nodes, std::unordered_set<std::string> keep) {
    only_ = std::move(nodes);
    for (const auto& v : g_.values) {
      if (keep.count(v->name)) extendable_.insert(v.get());
    }
  }

  int run() {
    std::vector<ir::Node*> candidates;
    for (const auto& n : g_.nodes)
      if (cheap_elementwise(*n) && (only_.empty() || only_.count(n->name)))
        candidates.push_back(n.get());
    for (ir::Node* n : candidates) try_node(*n);
    return added_;
  }

 private:
  // Node positions, computed again only after copies were inserted (once per rewrite, not
  // once per candidate: a graph of N nodes would otherwise cost N^2).
  void index() {
    if (!stale_) return;
    stale_ = false;
    pos_.clear();
    for (size_t i = 0; i < g_.nodes.size(); ++i) pos_[g_.nodes[i].get()] = static_cast<int>(i);
  }

  // Whether v is available at node position p without being recomputed: read there or later,
  // or never freed in the step (graph inputs and outputs, constants, parameters).
  bool live_at(const ir::Value* v, int p) const {
    if (live_to_end_.count(v) || extendable_.count(v) || v->is_graph_input) return true;
    if (!v->producer) return !state_.count(v);  // an initializer: constant unless a step updates it
    if (v->producer->op_type == "Constant") return true;
    return std::any_of(v->uses.begin(), v->uses.end(), [&](const ir::Use& u) {
      auto it = pos_.find(u.node);
      return it != pos_.end() && it->second >= p;
    });
  }

  // Whether v can be had at p: live there, or recomputed by a chain of cheap nodes (counted in
  // *nodes) from values live there.
  bool obtainable(const ir::Value* v, int p, int* nodes) const {
    if (live_at(v, p)) return true;
    const ir::Node* n = v->producer;
    if (!n || !cheap_elementwise(*n) || !pos_.count(n) || ++*nodes > o_.max_chain) return false;
    return std::all_of(n->inputs.begin(), n->inputs.end(),
                       [&](const ir::Value* in) { return obtainable(in, p, nodes); });
  }

  // v at p: itself where live, else a copy of its chain inserted before `before` (memo: one
  // copy per value and late segment).
  ir::Value* copy_at(ir::Value* v, int p, const ir::Node* before,
                     std::unordered_map<const ir::Value*, ir::Value*>& memo) {
    if (live_at(v, p)) return v;
    if (auto it = memo.find(v); it != memo.end()) return it->second;
    const ir::Node& n = *v->producer;
    std::vector<ir::Value*> inputs;
    for (ir::Value* in : n.inputs) inputs.push_back(copy_at(in, p, before, memo));
    return memo[v] = emit_copy(n, std::move(inputs), before);
  }

  ir::Value* emit_copy(const ir::Node& n, std::vector<ir::Value*> inputs, const ir::Node* before) {
    const ir::Value* y = n.outputs[0];
    std::string name = y->name + std::string(kRecomputedSuffix);
    while (g_.find_value(name)) name += "_";
    ir::Value* copy = g_.add_value(name, y->type);
    ir::Node* again = g_.insert_node_before(before, n.op_type, std::move(inputs), {copy},
                                            n.name + std::string(kRecomputedSuffix), n.domain);
    for (const ir::Attribute& a : n.attributes)
      again->attributes.push_back(ir::Attribute::make_int(a.name, a.i));
    again->phase = before->phase;
    ++added_;
    stale_ = true;
    return copy;
  }

  void try_node(ir::Node& n) {
    ir::Value* y = n.outputs[0];
    if (y->uses.size() < 2 || live_to_end_.count(y)) return;
    index();
    std::vector<ir::Use> uses = y->uses;
    if (std::any_of(uses.begin(), uses.end(),
                    [&](const ir::Use& u) { return !pos_.count(u.node); }))
      return;  // read by a subgraph
    std::sort(uses.begin(), uses.end(),
              [&](const ir::Use& a, const ir::Use& b) { return pos_[a.node] < pos_[b.node]; });
    // The late readers: from the first gap of at least min_gap nodes after an earlier reader.
    int prev = pos_[&n];
    size_t first_late = uses.size();
    for (size_t i = 0; i < uses.size(); ++i) {
      const int p = pos_[uses[i].node];
      if (i > 0 && p - prev >= o_.min_gap) {
        first_late = i;
        break;
      }
      prev = p;
    }
    if (first_late == uses.size()) return;
    // Only for readers that fuse with the copy: the recomputed value then never reaches memory.
    // (A GEMM reading it would need it written out again, which saves memory but not time.)
    if (!std::all_of(uses.begin() + static_cast<std::ptrdiff_t>(first_late), uses.end(),
                     [](const ir::Use& u) { return cheap_elementwise(*u.node); }))
      return;
    const ir::Node* before = uses[first_late].node;
    const int p = pos_[before];
    int nodes = 1;
    for (const ir::Value* in : n.inputs)
      if (!obtainable(in, p, &nodes)) return;
    std::unordered_map<const ir::Value*, ir::Value*> memo;
    std::vector<ir::Value*> inputs;
    for (ir::Value* in : n.inputs) inputs.push_back(copy_at(in, p, before, memo));
    ir::Value* copy = emit_copy(n, std::move(inputs), before);
    for (size_t i = first_late; i < uses.size(); ++i) ir::replace_use(uses[i], copy);
  }

  ir::Graph& g_;
  RecomputeElementwiseOptions o_;
  std::unordered_set<const ir::Value*> state_, live_to_end_, extendable_;
  std::unordered_set<std::string> only_;
  std::unordered_map<const ir::Node*, int> pos_;
  int added_ = 0;
  bool stale_ = true;
};

}  // namespace

int recompute_elementwise(ir::Model& model, const RecomputeElementwiseOptions& options) {
  return Recomputer(model, options).run();
}

int recompute_low_chains(ir::Model& model, const RecomputeElementwiseOptions& options) {
  if (model.low_source_chains.empty()) return 0;
  std::unordered_set<std::string> nodes, sources;
  for (const auto& c : model.low_source_chains) {
    sources.insert(c.source);
    nodes.insert(c.nodes.begin(), c.nodes.end());
  }
  Recomputer r(model, options);
  r.restrict_to(std::move(nodes), std::move(sources));
  return r.run();
}

}  // namespace ampc::passes
