#include "ir/graph.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>

#include "base/error.h"

namespace ampc::ir {

bool TensorType::is_static() const {
  if (!shape) return false;
  for (int64_t d : *shape) {
    if (d < 0) return false;
  }
  return true;
}

std::string TensorType::str() const {
  std::ostringstream os;
  os << (dtype == DType::kUndefined ? "?" : dtype_name(dtype));
  if (!shape) return os.str() + "[*]";
  os << '[';
  for (size_t i = 0; i < shape->size(); ++i) {
    if (i) os << ',';
    if ((*shape)[i] < 0) {
      os << '?';
    } else {
      os << (*shape)[i];
    }
  }
  os << ']';
  return os.str();
}

const Attribute* Node::attr(std::string_view attr_name) const {
  for (const auto& a : attributes) {
    if (a.name == attr_name) return &a;
  }
  return nullptr;
}

std::string Node::label() const {
  std::string who = name;
  if (who.empty() && owner) {
    for (size_t i = 0; i < owner->nodes.size(); ++i) {
      if (owner->nodes[i].get() == this) who = "#" + std::to_string(i);
    }
  }
  return "'" + who + "' (" + (domain.empty() ? "" : domain + ".") + op_type + ")";
}

Value* Graph::add_value(std::string value_name, TensorType type) {
  auto v = std::make_unique<Value>();
  v->name = std::move(value_name);
  v->type = std::move(type);
  v->owner = this;
  by_name_[v->name].push_back(v.get());
  values.push_back(std::move(v));
  return values.back().get();
}

Node* Graph::add_node(std::string op_type, std::vector<Value*> node_inputs,
                      std::vector<Value*> node_outputs, std::string node_name,
                      std::string node_domain) {
  auto n = std::make_unique<Node>();
  n->op_type = std::move(op_type);
  n->name = std::move(node_name);
  n->domain = std::move(node_domain);
  n->owner = this;
  n->phase = build_phase;
  n->inputs = std::move(node_inputs);
  n->outputs = std::move(node_outputs);
  for (size_t i = 0; i < n->inputs.size(); ++i) {
    if (n->inputs[i]) n->inputs[i]->uses.push_back({n.get(), static_cast<int>(i)});
  }
  for (size_t i = 0; i < n->outputs.size(); ++i) {
    if (!n->outputs[i]) continue;
    n->outputs[i]->producer = n.get();
    n->outputs[i]->producer_output = static_cast<int>(i);
  }
  nodes.push_back(std::move(n));
  return nodes.back().get();
}

Node* Graph::insert_node_before(const Node* pos, std::string op_type,
                                std::vector<Value*> node_inputs, std::vector<Value*> node_outputs,
                                std::string node_name, std::string node_domain) {
  Node* n = add_node(std::move(op_type), std::move(node_inputs), std::move(node_outputs),
                     std::move(node_name), std::move(node_domain));
  move_node_before(n, pos);
  return n;
}

Node* Graph::insert_node_after(const Node* pos, std::string op_type,
                               std::vector<Value*> node_inputs, std::vector<Value*> node_outputs,
                               std::string node_name, std::string node_domain) {
  Node* n = add_node(std::move(op_type), std::move(node_inputs), std::move(node_outputs),
                     std::move(node_name), std::move(node_domain));
  move_node_after(n, pos);
  return n;
}

Graph::NodeIterator Graph::position_of(const Node* node) {
  auto it = std::find_if(nodes.begin(), nodes.end(),
                         [&](const std::unique_ptr<Node>& n) { return n.get() == node; });
  if (it == nodes.end())
    throw Error("internal: node " + node->label() + " is not a node of graph '" + name + "'");
  return it;
}

// Both positions are looked up before anything moves, so that a node not in the graph
// leaves the order as it was.
void Graph::move_node_before(Node* node, const Node* pos) {
  move_node_to(position_of(node), pos ? position_of(pos) : nodes.end());
}

void Graph::move_node_after(Node* node, const Node* pos) {
  move_node_to(position_of(node), pos ? std::next(position_of(pos)) : nodes.begin());
}

void Graph::move_node_to(NodeIterator it, NodeIterator at) {
  if (it < at) {
    std::rotate(it, std::next(it), at);
  } else if (at < it) {
    std::rotate(at, it, std::next(it));
  }
}

void Graph::move_tail_before(size_t first, const Node* pos) {
  if (!pos || first >= nodes.size()) return;
  auto at = position_of(pos);
  const auto tail = nodes.begin() + static_cast<std::ptrdiff_t>(first);
  if (at >= tail)
    throw Error("internal: node " + pos->label() + " is not before the nodes to move");
  std::rotate(at, tail, nodes.end());
}

void Graph::remove_node(Node* node) {
  remove_nodes({node});
}

void Graph::remove_nodes(const std::vector<Node*>& dead) {
  std::unordered_set<const Node*> gone(dead.begin(), dead.end());
  std::unordered_set<const Value*> graph_outputs(outputs.begin(), outputs.end());
  for (Node* node : dead) {
    for (Value* out : node->outputs) {
      if (!out) continue;
      for (const Use& u : out->uses) {
        if (!gone.count(u.node))
          throw Error("internal: removing node " + node->label() + " whose output '" + out->name +
                      "' is still used");
      }
      if (graph_outputs.count(out))
        throw Error("internal: removing node " + node->label() + " that produces graph output '" +
                    out->name + "'");
    }
  }
  for (Node* node : dead) {
    for (Value* in : node->inputs) {
      if (in) std::erase_if(in->uses, [&](const Use& u) { return u.node == node; });
    }
  }
  erase_values_if([&](const Value& v) { return v.producer && gone.count(v.producer); });
  std::erase_if(nodes, [&](const std::unique_ptr<Node>& n) { return gone.count(n.get()) > 0; });
}

void Graph::detach_node(Node* node) {
  auto it = position_of(node);
  for (Value* in : node->inputs) {
    if (in) std::erase_if(in->uses, [&](const Use& u) { return u.node == node; });
  }
  for (Value* out : node->outputs) {
    if (!out || out->producer != node) continue;
    out->producer = nullptr;
    out->producer_output = -1;
  }
  nodes.erase(it);
}

Value* Graph::find_value(std::string_view value_name) const {
  const std::string key(value_name);
  for (const Graph* g = this; g; g = g->parent) {
    auto it = g->by_name_.find(key);
    if (it == g->by_name_.end()) continue;
    for (Value* v : it->second) {
      if (v->name == value_name) return v;
    }
  }
  return nullptr;
}

void Graph::unindex(Value* value) {
  auto it = by_name_.find(value->name);
  if (it == by_name_.end()) return;
  std::erase(it->second, value);
  if (it->second.empty()) by_name_.erase(it);
}

void Graph::rename_value(Value* value, std::string new_name) {
  unindex(value);
  value->name = std::move(new_name);
  by_name_[value->name].push_back(value);
}

void set_input(Node* n, size_t k, Value* v) {
  if (Value* old = n->inputs.at(k)) {
    std::erase_if(old->uses, [&](const Use& u) {
      return u.node == n && u.input_index == static_cast<int>(k);
    });
  }
  n->inputs[k] = v;
  if (v) v->uses.push_back({n, static_cast<int>(k)});
}

void replace_use(const Use& use, Value* to) {
  set_input(use.node, static_cast<size_t>(use.input_index), to);
}

void replace_all_uses(Value* from, Value* to) {
  if (from == to) return;  // (to->uses would grow while being read)
  for (const Use& u : from->uses) {
    u.node->inputs[static_cast<size_t>(u.input_index)] = to;
    if (to) to->uses.push_back(u);
  }
  from->uses.clear();
}

void trim_omitted_inputs(Node* n) {
  while (!n->inputs.empty() && !n->inputs.back()) n->inputs.pop_back();
}

void set_output(Node* n, size_t k, Value* v) {
  if (v && v->producer && (v->producer != n || v->producer_output != static_cast<int>(k)))
    throw Error("internal: value '" + v->name + "' already has a producer, node " +
                v->producer->label());
  if (k >= n->outputs.size()) n->outputs.resize(k + 1, nullptr);
  if (Value* old = n->outputs[k]; old && old != v && old->producer == n) {
    old->producer = nullptr;
    old->producer_output = -1;
  }
  n->outputs[k] = v;
  if (!v) return;
  v->producer = n;
  v->producer_output = static_cast<int>(k);
}

void replace_by_appended(Graph& g, Node* node, size_t first_new, Value* result) {
  replace_by_appended(g, node, first_new, std::vector<Value*>{result});
}

void replace_by_appended(Graph& g, Node* node, size_t first_new,
                         const std::vector<Value*>& results) {
  if (results.size() > node->outputs.size())
    throw Error("internal: more replacements than outputs of " + node->label());
  for (const Value* r : results) {
    if (r && !r->producer)
      throw Error("internal: the replacement '" + r->name + "' of " + node->label() +
                  " has no producer");
  }
  g.move_tail_before(first_new, node);
  const std::vector<Value*> ys = node->outputs;
  g.detach_node(node);                 // its outputs keep their readers; node is gone from here on
  std::vector<const Value*> replaced;  // a result whose output the node lacks stays as it is
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i] || !ys[i]) continue;
    set_output(results[i]->producer, static_cast<size_t>(results[i]->producer_output), ys[i]);
    replaced.push_back(results[i]);
  }
  g.erase_values_if([&replaced](const Value& v) {
    return std::find(replaced.begin(), replaced.end(), &v) != replaced.end();
  });
}

bool has_static_types(const Node& n) {
  if (n.outputs.empty() || !n.outputs[0]) return false;
  for (const auto* list : {&n.inputs, &n.outputs}) {
    for (const Value* v : *list) {
      if (v && !v->type.is_static()) return false;
    }
  }
  return true;
}

std::optional<int64_t> Model::opset_version(std::string_view op_domain) const {
  auto norm = [](std::string_view d) { return d == "ai.onnx" ? std::string_view() : d; };
  for (const auto& o : opsets) {
    if (norm(o.domain) == norm(op_domain)) return o.version;
  }
  return std::nullopt;
}

}  // namespace ampc::ir
