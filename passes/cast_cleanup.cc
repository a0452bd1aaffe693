#include "passes/cast_cleanup.h"

#include <algorithm>

namespace ampc::passes {
namespace {

// Bits of an integer dtype; 0 for any other.
int bits_of_integer(DType t) {
  return is_integer(t) ? 8 * static_cast<int>(dtype_size(t)) : 0;
}

bool is_unsigned(DType t) {
  return t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64;
}

// Significand bits (with the implicit one) of a float dtype: the widest integers it holds.
int significand_bits(DType t) {
  switch (t) {
    case DType::kBFloat16:
      return 8;
    case DType::kFloat16:
      return 11;
    case DType::kFloat32:
      return 24;
    case DType::kFloat64:
      return 53;
    default:
      return 0;
  }
}

DType cast_target(const ir::Node& n) {
  const ir::Attribute* to = n.attr("to");
  return to ? static_cast<DType>(to->i) : DType::kUndefined;
}

bool is_cast(const ir::Node* n) {
  return n && n->op_type == "Cast" && (n->domain.empty() || n->domain == "ai.onnx");
}

}  // namespace

bool dtype_holds(DType wide, DType narrow) {
  if (wide == narrow) return true;
  if (narrow == DType::kBool) return is_float(wide) || is_integer(wide);
  if (is_float(narrow)) {
    if (!is_float(wide)) return false;
    if (narrow == DType::kFloat64) return false;
    // fp16 and bf16 both sit inside fp32; neither holds the other (range vs precision).
    if (narrow == DType::kFloat32) return wide == DType::kFloat64;
    return wide == DType::kFloat32 || wide == DType::kFloat64;
  }
  if (!is_integer(narrow)) return false;
  const int nb = bits_of_integer(narrow);
  if (is_float(wide)) return (is_unsigned(narrow) ? nb : nb - 1) <= significand_bits(wide);
  if (!is_integer(wide)) return false;
  const int wb = bits_of_integer(wide);
  if (is_unsigned(narrow) == is_unsigned(wide)) return wb >= nb;
  return !is_unsigned(wide) && wb > nb;  // unsigned into a wider signed type
}

bool is_pinned_value(const ir::Model& model, const ir::Value* v) {
  const auto& outs = model.graph->outputs;
  if (std::find(outs.begin(), outs.end(), v) != outs.end()) return true;
  for (const auto& u : model.state_updates) {
    if (u.source == v || u.target == v) return true;
  }
  return false;
}

int cleanup_casts(ir::Model& model, const CastCleanupOptions&) {
  ir::Graph& g = *model.graph;
  int changed = 0;
  for (bool again = true; again;) {
    again = false;
    for (const auto& node : g.nodes) {
      ir::Node* c = node.get();
      if (!is_cast(c) || c->inputs.empty() || !c->inputs[0] || c->outputs.empty()) continue;
      ir::Value* in = c->inputs[0];
      ir::Value* out = c->outputs[0];
      const DType to = cast_target(*c);
      // Cast to the dtype the value has: readers read the value itself.
      if (in->type.dtype == to && !is_pinned_value(model, out) && !out->uses.empty()) {
        ir::replace_all_uses(out, in);
        ++changed;
        again = true;
        continue;
      }
      // a -> b -> c with b holding every a: read a directly (and a -> b -> a: no Cast).
      ir::Node* p = in->producer;
      if (!is_cast(p) || !p->inputs[0]) continue;
      ir::Value* src = p->inputs[0];
      if (!dtype_holds(in->type.dtype, src->type.dtype)) continue;
      if (src->type.dtype == to && !is_pinned_value(model, out)) {
        if (out->uses.empty()) continue;
        ir::replace_all_uses(out, src);
      } else {
        ir::set_input(c, 0, src);
      }
      ++changed;
      again = true;
    }
  }
  // Casts nobody reads any more.
  for (size_t i = g.nodes.size(); i-- > 0;) {
    ir::Node* c = g.nodes[i].get();
    if (!is_cast(c) || !c->outputs[0] || !c->outputs[0]->uses.empty() ||
        is_pinned_value(model, c->outputs[0]))
      continue;
    g.remove_node(c);
  }
  return changed;
}

}  // namespace ampc::passes
