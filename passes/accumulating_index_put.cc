#include "passes/accumulating_index_put.h"

#include <algorithm>

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;

bool all_zero_bytes(const ir::Tensor& t) {
  return std::all_of(t.bytes.begin(), t.bytes.end(), [](uint8_t b) { return b == 0; });
}

// Whether `v` is all zeros: a constant, or a ConstantOfShape of 0 (its default value).
bool is_zeros(const Value* v) {
  if (!v) return false;
  if (v->initializer) return v->initializer->strings.empty() && all_zero_bytes(*v->initializer);
  const Node* p = v->producer;
  if (!p || !p->domain.empty() || p->op_type != "ConstantOfShape") return false;
  const ir::Attribute* value = p->attr("value");
  return !value || (value->kind == ir::AttrKind::kTensor && all_zero_bytes(value->t));
}

bool read_by_add(const Value* v) {
  return std::any_of(v->uses.begin(), v->uses.end(), [](const ir::Use& u) {
    return u.node->domain.empty() && u.node->op_type == "Add";
  });
}

}  // namespace

int accumulate_index_puts(ir::Model& model) {
  int changed = 0;
  for (const auto& node : model.graph->nodes) {
    Node& n = *node;
    if (!n.domain.empty() || n.op_type != "ScatterND" || n.inputs.size() < 3 || !n.outputs[0])
      continue;
    const ir::Attribute* reduction = n.attr("reduction");
    if (reduction && reduction->s != "none") continue;
    if (!is_zeros(n.inputs[0]) || !read_by_add(n.outputs[0])) continue;
    std::erase_if(n.attributes, [](const ir::Attribute& a) { return a.name == "reduction"; });
    n.attributes.push_back(ir::Attribute::make_string("reduction", "add"));
    ++changed;
  }
  return changed;
}

}  // namespace ampc::passes
