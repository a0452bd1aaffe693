#include "passes/inline_constant_if.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;

// The constant condition of an If: its bool initializer of one element.
std::optional<bool> constant_condition(const Node& n) {
  const Value* c = n.inputs.empty() ? nullptr : n.inputs[0];
  if (!c || !c->initializer || c->initializer->dtype != DType::kBool ||
      c->initializer->numel() != 1 || c->initializer->bytes.empty())
    return std::nullopt;
  return c->initializer->bytes[0] != 0;
}

bool has_subgraphs(const ir::Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), [](const auto& n) {
    return std::any_of(n->attributes.begin(), n->attributes.end(),
                       [](const ir::Attribute& a) { return a.g || !a.graphs.empty(); });
  });
}

// An attribute without subgraphs, copied (Attribute owns its subgraphs, so it does not copy).
ir::Attribute copy_plain(const ir::Attribute& a) {
  ir::Attribute c;
  c.name = a.name;
  c.kind = a.kind;
  c.f = a.f;
  c.i = a.i;
  c.s = a.s;
  c.t = a.t;
  c.floats = a.floats;
  c.ints = a.ints;
  c.strings = a.strings;
  c.tensors = a.tensors;
  c.doc_string = a.doc_string;
  return c;
}

// The uses that nodes of `branch` (and of graphs nested in it) make of values go with the If:
// the branch graphs are destroyed with the node, and outer values must not keep their uses.
void drop_uses(const ir::Graph& branch) {
  branch.for_each_graph([](const ir::Graph& g) {
    for (const auto& n : g.nodes) {
      for (Value* in : n->inputs) {
        if (in) std::erase_if(in->uses, [&n](const ir::Use& u) { return u.node == n.get(); });
      }
    }
  });
}

// Copies the branch's initializers and nodes into `g` (appended), mapping its values to new
// ones; returns the values standing for the branch's outputs, each from an appended Identity.
std::vector<Value*> copy_branch(ir::Graph& g, const ir::Graph& branch, const std::string& prefix) {
  std::map<const Value*, Value*> mapped;
  for (const Value* init : branch.initializers) {
    Value* v = g.add_value(prefix + init->name, init->type);
    v->initializer = std::make_unique<ir::Tensor>(*init->initializer);
    v->initializer->name = v->name;
    g.initializers.push_back(v);
    mapped[init] = v;
  }
  auto map_value = [&mapped](Value* v) -> Value* {
    if (!v) return nullptr;
    auto it = mapped.find(v);
    return it == mapped.end() ? v : it->second;  // an outer value is read as it is
  };
  for (const auto& bn : branch.nodes) {
    std::vector<Value*> ins, outs;
    for (Value* in : bn->inputs) ins.push_back(map_value(in));
    for (Value* o : bn->outputs) {
      Value* v = o ? g.add_value(prefix + o->name, o->type) : nullptr;
      if (o) mapped[o] = v;
      outs.push_back(v);
    }
    Node* c = g.add_node(bn->op_type, ins, outs, prefix + bn->name, bn->domain);
    for (const auto& a : bn->attributes) c->attributes.push_back(copy_plain(a));
  }
  std::vector<Value*> results;
  for (size_t k = 0; k < branch.outputs.size(); ++k) {
    Value* src = map_value(branch.outputs[k]);
    Value* r = g.add_value(prefix + "output" + std::to_string(k), src->type);
    g.add_node("Identity", {src}, {r}, prefix + "output" + std::to_string(k));
    results.push_back(r);
  }
  return results;
}

}  // namespace

int inline_constant_ifs(ir::Model& model) {
  ir::Graph& g = *model.graph;
  int inlined = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node* n = g.nodes[i].get();
    if (n->op_type != "If" || !n->domain.empty()) continue;
    const std::optional<bool> taken = constant_condition(*n);
    if (!taken) continue;
    const ir::Attribute* branch = n->attr(*taken ? "then_branch" : "else_branch");
    if (!branch || !branch->g || has_subgraphs(*branch->g) ||
        branch->g->outputs.size() != n->outputs.size())
      continue;
    const std::string prefix =
        (n->name.empty() ? std::string("if") : n->name) + (*taken ? "/then/" : "/else/");
    const size_t first_new = g.nodes.size();
    const std::vector<Value*> results = copy_branch(g, *branch->g, prefix);
    for (const auto& a : n->attributes) {
      if (a.g) drop_uses(*a.g);
    }
    ir::replace_by_appended(g, n, first_new, results);
    ++inlined;
  }
  return inlined;
}

}  // namespace ampc::passes
