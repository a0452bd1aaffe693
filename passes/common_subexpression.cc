#include "passes/common_subexpression.h"

#include <cstring>
#include <map>
#include <string>

#include "ops/op_info.h"
#include "passes/cast_cleanup.h"

namespace ampc::passes {
namespace {

bool has_subgraph(const ir::Node& n) {
  for (const auto& a : n.attributes) {
    if (a.g || !a.graphs.empty()) return true;
  }
  return false;
}

// Ops whose result is drawn at random: two of them are the same only with the same seed.
bool is_random(const ir::Node& n) {
  return ops::op_info(n.domain, n.op_type).random;  // ops/op_table.cc
}

// A key that is equal for two nodes exactly when they compute the same thing: op, domain,
// every attribute (floats by their bits) and the identity of every input.
std::string node_key(const ir::Node& n) {
  std::string k = n.domain + "\n" + n.op_type + "\n" + std::to_string(n.outputs.size());
  for (const ir::Value* v : n.inputs) k += "\n@" + std::to_string(reinterpret_cast<uintptr_t>(v));
  auto add_float = [&](float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    k += std::to_string(bits) + ",";
  };
  auto add_tensor = [&](const ir::Tensor& t) {
    k += std::to_string(static_cast<int>(t.dtype)) + "[";
    for (int64_t d : t.dims) k += std::to_string(d) + ",";
    k += "]" + std::to_string(t.bytes.size()) + ":";
    k.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  };
  for (const auto& a : n.attributes) {
    k += "\n" + a.name + "#" + std::to_string(static_cast<int>(a.kind)) + "=";
    switch (a.kind) {
      case ir::AttrKind::kFloat:
        add_float(a.f);
        break;
      case ir::AttrKind::kInt:
        k += std::to_string(a.i);
        break;
      case ir::AttrKind::kString:
        k += std::to_string(a.s.size()) + ":" + a.s;
        break;
      case ir::AttrKind::kTensor:
        add_tensor(a.t);
        break;
      case ir::AttrKind::kFloats:
        for (float f : a.floats) add_float(f);
        break;
      case ir::AttrKind::kInts:
        for (int64_t i : a.ints) k += std::to_string(i) + ",";
        break;
      case ir::AttrKind::kStrings:
        for (const auto& s : a.strings) k += std::to_string(s.size()) + ":" + s;
        break;
      case ir::AttrKind::kTensors:
        for (const auto& t : a.tensors) add_tensor(t);
        break;
      case ir::AttrKind::kGraph:
      case ir::AttrKind::kGraphs:
        break;  // excluded by has_subgraph
    }
  }
  return k;
}

bool mergeable(const ir::Node& n) {
  if (!(n.domain.empty() || n.domain == "ai.onnx") || has_subgraph(n)) return false;
  return !is_random(n) || n.attr("seed") != nullptr;
}

}  // namespace

int eliminate_common_subexpressions(ir::Model& model, const CseOptions&) {
  ir::Graph& g = *model.graph;
  std::map<std::string, ir::Node*> seen;
  std::vector<ir::Node*> duplicates;
  // Nodes are in topological order, so inputs are already canonical when a node is keyed.
  for (const auto& node : g.nodes) {
    ir::Node* n = node.get();
    if (!mergeable(*n)) continue;
    auto [it, inserted] = seen.try_emplace(node_key(*n), n);
    if (inserted) continue;
    ir::Node* first = it->second;
    bool pinned = false;
    for (const ir::Value* v : n->outputs) pinned |= v && is_pinned_value(model, v);
    if (pinned) continue;
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      if (!n->outputs[i]) continue;
      if (!first->outputs[i]) {  // the first one omits an output this one needs
        pinned = true;
        break;
      }
    }
    if (pinned) continue;
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      if (n->outputs[i]) ir::replace_all_uses(n->outputs[i], first->outputs[i]);
    }
    duplicates.push_back(n);
  }
  g.remove_nodes(duplicates);
  return static_cast<int>(duplicates.size());
}

}  // namespace ampc::passes
