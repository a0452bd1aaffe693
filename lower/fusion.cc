#include "lower/fusion.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/dtype.h"
#include "base/error.h"
#include "ops/op_info.h"

namespace ampc::lower {
namespace {

using ir::Node;
using ir::Value;

bool is_float_type(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 ||
         t == DType::kFloat64;
}

bool is_kernel_type(DType t) {
  return is_float_type(t) || t == DType::kBool;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Numpy broadcasting of `in` to `out` without growing `out`.
bool broadcasts_to(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  if (in.size() > out.size()) return false;
  for (size_t k = 1; k <= in.size(); ++k) {
    const int64_t d = in[in.size() - k];
    if (d != out[out.size() - k] && d != 1) return false;
  }
  return true;
}

// How each op fuses is its FusedForm in the op table (ops/op_info.h).
using Kind = ops::FusedForm;

// The float attributes of the activations the kernel builder expands.
bool float_attribute_of(const std::string& op, const std::string& name) {
  if (name == "alpha") {
    return op == "HardSigmoid" || op == "LeakyRelu" || op == "Elu" || op == "Celu" ||
           op == "Selu" || op == "ThresholdedRelu";
  }
  return (name == "beta" && op == "HardSigmoid") || (name == "gamma" && op == "Selu");
}

// Attributes other than these change the op's meaning (legacy broadcast, string Cast
// targets, ...): such nodes stay unfused.
bool attributes_supported(const Node& n, Kind kind) {
  for (const auto& a : n.attributes) {
    const bool ok = (kind == Kind::kCast && a.name == "to" && a.kind == ir::AttrKind::kInt) ||
                    (kind == Kind::kCast && a.name == "saturate") ||
                    (n.op_type == "IsInf" && a.kind == ir::AttrKind::kInt &&
                     (a.name == "detect_positive" || a.name == "detect_negative")) ||
                    (a.kind == ir::AttrKind::kFloat && float_attribute_of(n.op_type, a.name));
    if (!ok) return false;
  }
  return kind != Kind::kCast || n.attr("to") != nullptr;
}

// The element types each kind of op accepts (the CPU kernel's, restricted to what the
// kernel instruction set computes the same way).
bool types_supported(const Node& n, Kind kind) {
  std::vector<DType> in;
  // An omitted input (only a Clip bound gets here) counts as x's type.
  for (const Value* v : n.inputs) in.push_back(v ? v->type.dtype : n.inputs[0]->type.dtype);
  const DType out = n.outputs[0]->type.dtype;
  auto all_same_float = [&] {
    for (DType t : in) {
      if (t != in[0]) return false;
    }
    return is_float_type(in[0]);
  };
  switch (kind) {
    case Kind::kArith:
      return in.size() == 2 && all_same_float();
    case Kind::kCompare:  // Equal also on bool
      return in.size() == 2 && (all_same_float() ||
                                (n.op_type == "Equal" && in[0] == DType::kBool && in[1] == in[0]));
    case Kind::kPow:
      return in.size() == 2 && is_float_type(in[0]) && is_float_type(in[1]);
    case Kind::kVariadic:
      return !in.empty() && all_same_float();
    case Kind::kUnary:
    case Kind::kActivation:
    case Kind::kPredicate:
      return in.size() == 1 && is_float_type(in[0]);
    case Kind::kNot:
      return in.size() == 1 && in[0] == DType::kBool;
    case Kind::kLogic:
      return in.size() == 2 && in[0] == DType::kBool && in[1] == DType::kBool;
    case Kind::kPRelu:  // a slope of x's type that broadcasts to x (numpy's rules, opset 7 on)
      return in.size() == 2 && all_same_float() &&
             broadcasts_to(*n.inputs[1]->type.shape, *n.inputs[0]->type.shape);
    case Kind::kClip:  // present bounds: scalars of x's type, as the CPU op requires
      if (in.empty() || in.size() > 3 || !is_float_type(in[0])) return false;
      for (size_t k = 1; k < in.size(); ++k) {
        if (n.inputs[k] && (in[k] != in[0] || numel(*n.inputs[k]->type.shape) != 1)) return false;
      }
      return true;
    case Kind::kWhere:
      return in.size() == 3 && in[0] == DType::kBool && in[1] == in[2] && is_kernel_type(in[1]);
    case Kind::kCast:
      return in.size() == 1 && is_kernel_type(in[0]) && is_kernel_type(out) &&
             static_cast<int64_t>(out) == n.attr("to")->i;
    case Kind::kIdentity:
      return in.size() == 1 && is_kernel_type(in[0]) && in[0] == out;
    case Kind::kNone:
      break;
  }
  return false;
}

// State updates computed in place into their state (FusionGroup::guarded_states).
struct StateInfo {
  std::unordered_map<const Value*, const Value*> target_of_source;  // source -> state
  std::unordered_set<const Value*> targets;
  std::unordered_set<const Value*> sources;
  std::unordered_set<const Value*> graph_outputs;
};

class Fuser {
 public:
  Fuser(const ir::Model& model, const FusionOptions& options)
      : model_(model), g_(*model.graph), options_(options) {}

  std::vector<FusionStep> run() {
    index_graph();
    merge_producers_into_consumers();
    merge_siblings();
    build_groups();
    return schedule();
  }

 private:
  void index_graph();
  int find(int i) {
    while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
    return i;
  }
  void unite(int a, int b);
  bool try_merge(int a, int b);
  bool across_passes(int a, int b) const;
  void merge_producers_into_consumers();
  void merge_siblings();
  void build_groups();
  void detect_guard(FusionGroup& group, int root);
  std::vector<FusionStep> schedule();

  const ir::Model& model_;
  const ir::Graph& g_;
  const FusionOptions& options_;
  StateInfo states_;
  std::vector<const Node*> nodes_;
  std::unordered_map<const Node*, int> index_;
  std::vector<char> fusible_;
  std::vector<std::vector<int>> preds_;  // distinct producers of each node's inputs
  std::vector<std::vector<int>> succs_;  // distinct consumers of each node's outputs
  // Union-find of groups; members_, first_ and last_ are kept at the roots.
  std::vector<int> parent_;
  std::vector<std::vector<int>> members_;
  std::vector<int> first_, last_;
  std::vector<char> updates_;  // the group computes a state update's source
  std::vector<double> pos_;    // a topological order of the groups (see try_merge)
  // After CSE, a node computing what an earlier node computes from the same inputs is a
  // deliberate recomputation (passes/recompute_casts.h), placed where it is read: it joins
  // neither its producers' groups nor its siblings' (either would compute it early again).
  std::vector<char> recomputes_;
  // Built groups, by root.
  std::unordered_map<int, FusionGroup> groups_;
};

void Fuser::index_graph() {
  for (const auto& n : g_.nodes) {
    index_[n.get()] = static_cast<int>(nodes_.size());
    nodes_.push_back(n.get());
  }
  const size_t n = nodes_.size();
  fusible_.resize(n);
  preds_.resize(n);
  parent_.resize(n);
  members_.resize(n);
  first_.resize(n);
  last_.resize(n);
  updates_.resize(n);
  succs_.resize(n);
  pos_.resize(n);
  recomputes_.resize(n);
  std::set<std::tuple<std::string, std::vector<Value*>, std::string>> computed;
  for (size_t i = 0; i < n; ++i) {
    const Node& node = *nodes_[i];
    fusible_[i] =
        is_fusible(model_, node) && !(options_.keep_unfused && options_.keep_unfused(node));
    if (fusible_[i]) {  // is_fusible: one output
      recomputes_[i] =
          !computed.emplace(node.op_type, node.inputs, node.outputs[0]->type.str()).second;
    }
    parent_[i] = static_cast<int>(i);
    members_[i] = {static_cast<int>(i)};
    first_[i] = last_[i] = static_cast<int>(i);
    pos_[i] = static_cast<double>(i);
    for (const Value* v : node.inputs) {
      if (!v || !v->producer) continue;
      auto it = index_.find(v->producer);
      if (it == index_.end()) continue;  // a value of an enclosing graph
      if (std::find(preds_[i].begin(), preds_[i].end(), it->second) == preds_[i].end()) {
        preds_[i].push_back(it->second);
        succs_[it->second].push_back(static_cast<int>(i));
      }
    }
  }
  for (const auto& u : model_.state_updates) {
    states_.target_of_source[u.source] = u.target;
    states_.targets.insert(u.target);
    states_.sources.insert(u.source);
  }
  for (const Value* v : g_.outputs) states_.graph_outputs.insert(v);
  for (size_t i = 0; i < n; ++i) {
    updates_[i] = fusible_[i] && states_.sources.count(nodes_[i]->outputs[0]) > 0;
  }
}

void Fuser::unite(int a, int b) {
  if (members_[a].size() < members_[b].size()) std::swap(a, b);
  parent_[b] = a;
  members_[a].insert(members_[a].end(), members_[b].begin(), members_[b].end());
  members_[b].clear();
  members_[b].shrink_to_fit();
  first_[a] = std::min(first_[a], first_[b]);
  last_[a] = std::max(last_[a], last_[b]);
  updates_[a] = updates_[a] || updates_[b];
}

// Merges groups a and b unless that could make a cycle. Every group has a position, and
// every edge between groups goes to a later position (initially the node's index in the
// graph order), so the groups are acyclic. The merged group needs a position after all its
// producers' groups and before all its consumers' groups: it takes a's or b's position when
// that one fits, else a point between. When no position fits, the merge is refused: that
// refuses every merge that would make a cycle (a path from a to b through other groups
// passes a consumer of a placed before a producer of b), and it only looks at the two
// groups' neighbours.
bool Fuser::try_merge(int a, int b) {
  double after = -std::numeric_limits<double>::infinity();
  double before = std::numeric_limits<double>::infinity();
  for (int g : {a, b}) {
    for (int m : members_[g]) {
      for (int p : preds_[m]) {
        const int r = find(p);
        if (r != a && r != b) after = std::max(after, pos_[r]);
      }
      for (int c : succs_[m]) {
        const int r = find(c);
        if (r != a && r != b) before = std::min(before, pos_[r]);
      }
    }
  }
  const double hi = std::max(pos_[a], pos_[b]), lo = std::min(pos_[a], pos_[b]);
  const double pos = hi < before ? hi : (lo > after ? lo : after + (before - after) / 2);
  if (!(after < pos && pos < before)) return false;
  unite(a, b);
  pos_[find(a)] = pos;
  return true;
}

// Whether a and b are a forward node and a backward node whose groups should stay apart. A
// backward computation merged into a forward group runs in the forward and keeps its result
// until the backward. That pays when the result is smaller than the forward value it replaces
// (ReLU's gradient mask: a bool kept instead of a float); otherwise the forward values it
// reads are mostly kept for the backward anyway (passes/recompute_elementwise.h), and kept in
// the backward it reads them there and its result goes straight to its readers.
bool Fuser::across_passes(int a, int b) const {
  const Node *fwd = nodes_[a], *bwd = nodes_[b];
  if (fwd->phase == ir::Phase::kBackward) std::swap(fwd, bwd);
  if (fwd->phase != ir::Phase::kForward || bwd->phase != ir::Phase::kBackward) return false;
  return dtype_size(bwd->outputs[0]->type.dtype) >= dtype_size(fwd->outputs[0]->type.dtype);
}

// A consumer joins the group of each fusible producer whose output is the consumer's shape,
// within one pass (across_passes).
void Fuser::merge_producers_into_consumers() {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!fusible_[i]) continue;
    const auto& shape = *nodes_[i]->outputs[0]->type.shape;
    for (int p : preds_[i]) {
      if (recomputes_[i] || !fusible_[p] || *nodes_[p]->outputs[0]->type.shape != shape ||
          across_passes(p, static_cast<int>(i)))
        continue;
      const int a = find(p), b = find(static_cast<int>(i));
      if (a != b) try_merge(a, b);
    }
  }
}

// Groups of one shape reading a common full-shape value become one kernel with several
// outputs (the value is read once). Only groups close in the graph order merge: a merged
// group runs where its first member was, so a far one would move work (and memory) across
// the step; nor do a forward group and a backward one (across_passes). State updates (the
// optimizer's) are not merged with other work: alike across
// parameters, they become multi-tensor kernels, and their outputs all stay guardable.
void Fuser::merge_siblings() {
  constexpr int kWindow = 256;
  auto visit = [&](const Value* v) {
    if (!v->type.is_static() || v->uses.size() < 2) return;
    int first = -1;
    for (const auto& use : v->uses) {
      auto it = index_.find(use.node);
      if (it == index_.end()) continue;
      const int c = it->second;
      if (!fusible_[c] || *nodes_[c]->outputs[0]->type.shape != *v->type.shape) continue;
      if (first < 0) {
        first = c;
        continue;
      }
      const int a = find(first), b = find(c);
      if (a == b || std::abs(last_[a] - last_[b]) > kWindow || updates_[a] != updates_[b] ||
          recomputes_[first] || recomputes_[c] || across_passes(first, c))
        continue;
      try_merge(a, b);
    }
  };
  for (const Value* v : g_.inputs) visit(v);
  for (const Value* v : g_.initializers) visit(v);
  for (const Node* n : nodes_) {
    for (const Value* v : n->outputs) {
      if (v) visit(v);
    }
  }
}

void Fuser::build_groups() {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!fusible_[i] || find(static_cast<int>(i)) != static_cast<int>(i)) continue;
    const int root = static_cast<int>(i);
    std::vector<int> members = members_[root];
    std::sort(members.begin(), members.end());
    FusionGroup group;
    group.shape = *nodes_[members[0]]->outputs[0]->type.shape;
    std::unordered_set<const Value*> produced, seen;
    for (int m : members) produced.insert(nodes_[m]->outputs[0]);
    for (int m : members) {
      const Node* n = nodes_[m];
      group.nodes.push_back(n);
      for (const Value* v : n->inputs) {
        if (v && !produced.count(v) && seen.insert(v).second) group.inputs.push_back(v);
      }
      const Value* out = n->outputs[0];
      bool outside = states_.sources.count(out) || states_.graph_outputs.count(out);
      for (const auto& use : out->uses) {
        auto it = index_.find(use.node);
        outside |= it == index_.end() || find(it->second) != root;
      }
      if (outside) group.outputs.push_back(out);
    }
    group.flat = true;
    const int64_t count = numel(group.shape);
    for (const Value* v : group.inputs) {
      const int64_t n = numel(*v->type.shape);
      group.flat &= n == 1 || n == count;
    }
    if (group.flat) detect_guard(group, root);
    groups_.emplace(root, std::move(group));
  }
}

void Fuser::detect_guard(FusionGroup& group, int root) {
  // A state `s` an output may be computed into: the group's shape, not a graph output, not
  // itself a source of an update, not taken by another output.
  std::vector<const Value*> states;
  auto takes = [&](const Value* s) {
    if (*s->type.shape != group.shape || states_.graph_outputs.count(s) ||
        states_.sources.count(s) || std::count(states.begin(), states.end(), s))
      return false;
    states.push_back(s);
    return true;
  };
  // The state `out` is the new value of, when only the state update reads it (or, with
  // `inside`, also members of the group, which take it from the kernel's registers).
  auto updated_state = [&](const Value* out, bool inside) -> const Value* {
    if (states_.graph_outputs.count(out)) return nullptr;
    for (const auto& use : out->uses) {
      auto it = index_.find(use.node);
      if (!inside || it == index_.end() || find(it->second) != root) return nullptr;
    }
    auto it = states_.target_of_source.find(out);
    return it == states_.target_of_source.end() ? nullptr : it->second;
  };
  const Value* guard = nullptr;
  bool guarded = true;
  for (const Value* out : group.outputs) {
    const Node* w = out->producer;
    if (w->op_type != "Where") {
      guarded = false;
      break;
    }
    const Value* g = w->inputs[0];
    const Value* s = w->inputs[1];
    const bool g_outside =
        !g->producer || !index_.count(g->producer) || find(index_.at(g->producer)) != root;
    if (!g_outside || numel(*g->type.shape) != 1 || (guard && g != guard)) {
      guarded = false;
      break;
    }
    guard = g;
    if (updated_state(out, false) != s || !takes(s)) {
      guarded = false;
      break;
    }
  }
  if (guarded && guard) {
    group.guard = guard;
    group.guarded_states = std::move(states);
    return;
  }
  // Without a guard: every output is the new value of a state that nothing after the group
  // reads (an optimizer update without a skip-step, a running statistic), computed straight
  // into that state. The kernel reads and writes each element at one index, so reading the
  // old value and writing the new one in place is safe; a member reading another output (the
  // parameter update reading the new momentum) takes it from the kernel's registers.
  states.clear();
  for (const Value* out : group.outputs) {
    const Value* s = updated_state(out, true);
    if (!s || !takes(s)) return;
  }
  if (!states.empty()) group.guarded_states = std::move(states);
}

// Kahn's algorithm over units (groups and unfused nodes), by the position of their first
// node. Candidates for multi-tensor steps (flat groups whose kernel structure occurs more
// than once, see below) are held back while other units are ready; when only held ones are
// left, the held groups of one structure (ready together, so independent) become one step.
std::vector<FusionStep> Fuser::schedule() {
  const int n = static_cast<int>(nodes_.size());
  std::vector<int> unit_of(n, -1);
  std::vector<int> unit_root;  // group root, or -1 for an unfused node
  std::vector<int> unit_first;
  for (int i = 0; i < n; ++i) {
    const int r = fusible_[i] ? find(i) : -1;
    if (r >= 0 && r != i) continue;
    unit_of[i] = static_cast<int>(unit_root.size());
    unit_root.push_back(r);
    unit_first.push_back(r >= 0 ? first_[r] : i);
  }
  for (int i = 0; i < n; ++i) {
    if (unit_of[i] < 0) unit_of[i] = unit_of[find(i)];
  }
  const int units = static_cast<int>(unit_root.size());
  std::vector<std::vector<int>> succ(units);
  std::vector<int> indegree(units, 0), last_from(units, -1);
  auto add_edge = [&](int from, int to) {
    if (from == to || last_from[from] == to) return;
    last_from[from] = to;
    succ[from].push_back(to);
    ++indegree[to];
  };
  for (int u = 0; u < units; ++u) {
    const int r = unit_root[u];
    const std::vector<int> single = {unit_first[u]};
    for (int m : r >= 0 ? members_[r] : single) {
      for (int p : preds_[m]) add_edge(unit_of[p], u);
    }
    // A guarded group writes into its states: every other reader runs before it.
    if (r >= 0) {
      for (const Value* s : groups_.at(r).guarded_states) {
        for (const auto& use : s->uses) {
          if (auto it = index_.find(use.node); it != index_.end()) add_edge(unit_of[it->second], u);
        }
      }
    }
  }

  // Multi-tensor candidates: the structure keys that occur more than once.
  std::vector<int> key_of(units, -1);
  std::vector<int> units_of_key;  // per structure: how many units it has
  if (options_.structure_key) {
    std::map<std::string, std::vector<int>> by_key;
    for (int u = 0; u < units; ++u) {
      if (unit_root[u] < 0) continue;
      const FusionGroup& group = groups_.at(unit_root[u]);
      // Only groups that lose nothing by waiting: those computed from graph inputs, constants
      // and state alone (ready from the start: the fp16 copies of the weights), and those
      // whose results nothing reads (ready at the end: the optimizer's updates). Holding
      // others back would keep their inputs alive longer than the graph order does.
      bool from_sources = true;
      for (const Value* v : group.inputs) from_sources = from_sources && !v->producer;
      if (group.flat && (from_sources || succ[u].empty()))
        by_key[options_.structure_key(group)].push_back(u);
    }
    int next = 0;
    for (const auto& [key, us] : by_key) {
      if (us.size() < 2) continue;
      for (int u : us) key_of[u] = next;
      units_of_key.push_back(static_cast<int>(us.size()));
      ++next;
    }
  }

  using Entry = std::pair<int, int>;  // (first node, unit)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (int u = 0; u < units; ++u) {
    if (indegree[u] == 0) ready.push({unit_first[u], u});
  }
  std::map<int, std::vector<int>> held;  // key -> ready units, in readiness order
  std::vector<FusionStep> steps;
  int done = 0;
  auto finish = [&](int u) {
    ++done;
    for (int s : succ[u]) {
      if (--indegree[s] == 0) ready.push({unit_first[s], s});
    }
  };
  auto step_of = [&](const std::vector<int>& us) {
    FusionStep step;
    const int r = unit_root[us[0]];
    if (us.size() == 1 && (r < 0 || members_[r].size() == 1)) {
      step.node = nodes_[unit_first[us[0]]];
    } else {
      for (int u : us) step.segments.push_back(groups_.at(unit_root[u]));
    }
    return step;
  };
  while (!ready.empty() || !held.empty()) {
    if (!ready.empty()) {
      const int u = ready.top().second;
      ready.pop();
      if (key_of[u] >= 0) {
        auto& waiting = held[key_of[u]];
        waiting.push_back(u);
        // Complete: every unit of the structure is ready, so it runs now. Waiting longer
        // could only let a pass blocked on it (the forward on its weight casts) drain other
        // ready work into the wrong place (backward work into the forward, with the memory
        // its results keep).
        if (static_cast<int>(waiting.size()) == units_of_key[key_of[u]]) {
          std::vector<int> us = std::move(waiting);
          held.erase(key_of[u]);
          std::sort(us.begin(), us.end(),
                    [&](int a, int b) { return unit_first[a] < unit_first[b]; });
          steps.push_back(step_of(us));
          for (int w : us) finish(w);
        }
        continue;
      }
      steps.push_back(step_of({u}));
      finish(u);
      continue;
    }
    // Only held units are ready: the structure whose earliest unit comes first runs now.
    auto best = held.begin();
    int best_first = n;
    for (auto it = held.begin(); it != held.end(); ++it) {
      int f = n;
      for (int u : it->second) f = std::min(f, unit_first[u]);
      if (f < best_first) {
        best_first = f;
        best = it;
      }
    }
    std::vector<int> us = std::move(best->second);
    held.erase(best);
    std::sort(us.begin(), us.end(), [&](int a, int b) { return unit_first[a] < unit_first[b]; });
    steps.push_back(step_of(us));
    for (int u : us) finish(u);
  }
  if (done != units) throw Error("internal: the fusion schedule has a cycle");
  return steps;
}

}  // namespace

bool is_fusible(const ir::Model& model, const ir::Node& n) {
  const Kind kind = ops::op_info(n.domain, n.op_type).fused;
  if (kind == Kind::kNone) return false;
  // Opset 6's PRelu spreads a 1-D slope over axis 1; the kernels broadcast numpy's way.
  if (kind == Kind::kPRelu && model.opset_version(n.domain).value_or(0) < 7) return false;
  if (n.outputs.size() != 1 || !n.outputs[0] || !n.outputs[0]->type.is_static()) return false;
  const auto& shape = *n.outputs[0]->type.shape;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value* v = n.inputs[i];
    // An omitted Clip bound (torch.clamp(x, max=m) exports Clip(x, "", m)) is no operand.
    if (!v && kind == Kind::kClip && i > 0) continue;
    if (!v || !v->type.is_static() || !broadcasts_to(*v->type.shape, shape)) return false;
  }
  return attributes_supported(n, kind) && types_supported(n, kind);
}

FusionGroup group_of_one(const ir::Node& node) {
  FusionGroup group;
  group.nodes = {&node};
  group.shape = *node.outputs[0]->type.shape;
  group.outputs = {node.outputs[0]};
  std::unordered_set<const Value*> seen;
  const int64_t count = numel(group.shape);
  group.flat = true;
  for (const Value* v : node.inputs) {
    if (!v || !seen.insert(v).second) continue;
    group.inputs.push_back(v);
    const int64_t n = numel(*v->type.shape);
    group.flat &= n == 1 || n == count;
  }
  return group;
}

std::vector<FusionStep> fuse_elementwise(const ir::Model& model, const FusionOptions& options) {
  return Fuser(model, options).run();
}

}  // namespace ampc::lower
