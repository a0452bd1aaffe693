#include "passes/transpose_chains.h"

#include <optional>
#include <vector>

#include "passes/cast_cleanup.h"

namespace ampc::passes {
namespace {

bool is_transpose(const ir::Node* n) {
  return n && n->op_type == "Transpose" && (n->domain.empty() || n->domain == "ai.onnx");
}

// The node's permutation (ONNX's default: the axes reversed), or nothing when the rank is not
// known.
std::optional<std::vector<int64_t>> permutation(const ir::Node& t) {
  if (const ir::Attribute* perm = t.attr("perm")) return perm->ints;
  const ir::TensorType& type = t.inputs[0]->type;
  if (!type.shape) return std::nullopt;
  std::vector<int64_t> reversed;
  for (size_t i = type.shape->size(); i-- > 0;) reversed.push_back(static_cast<int64_t>(i));
  return reversed;
}

bool is_identity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

void set_perm(ir::Node& t, std::vector<int64_t> perm) {
  for (auto& a : t.attributes) {
    if (a.name == "perm") {
      a.ints = std::move(perm);
      return;
    }
  }
  t.attributes.push_back(ir::Attribute::make_ints("perm", std::move(perm)));
}

}  // namespace

int compose_transposes(ir::Model& model) {
  int composed = 0;
  std::vector<ir::Node*> identities;
  // In graph order: a chain of three composes from its start, the first link first.
  for (const auto& np : model.graph->nodes) {
    ir::Node* outer = np.get();
    if (!is_transpose(outer) || outer->inputs.empty() || !outer->inputs[0]) continue;
    const ir::Node* inner = outer->inputs[0]->producer;
    if (!is_transpose(inner) || !inner->inputs[0]) continue;
    const auto p1 = permutation(*inner), p2 = permutation(*outer);
    if (!p1 || !p2 || p1->size() != p2->size()) continue;
    std::vector<int64_t> perm(p2->size());
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = (*p1)[static_cast<size_t>((*p2)[i])];
    ir::set_input(outer, 0, inner->inputs[0]);
    set_perm(*outer, perm);
    ++composed;
    if (is_identity(perm) && !is_pinned_value(model, outer->outputs[0]))
      identities.push_back(outer);
  }
  // x -> identity: its readers read x (the node then has none; dead-code elimination drops it).
  for (ir::Node* t : identities) ir::replace_all_uses(t->outputs[0], t->inputs[0]);
  return composed;
}

}  // namespace ampc::passes
