#include "passes/circular_pad_export.h"

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;

// The constant integers of input `i` of `n` (absent or computed: nothing).
std::optional<std::vector<int64_t>> constant_ints(const Node& n, size_t i) {
  if (i >= n.inputs.size() || !n.inputs[i] || !n.inputs[i]->initializer) return std::nullopt;
  return ir::int_values(*n.inputs[i]->initializer);
}

// The Concat axis as a non-negative index, given its input's rank (nothing when unknown).
std::optional<int64_t> concat_axis(const Node& concat) {
  const ir::Attribute* a = concat.attr("axis");
  const Value* first = concat.inputs.empty() ? nullptr : concat.inputs[0];
  if (!a || !first || !first->type.shape) return std::nullopt;
  const auto rank = static_cast<int64_t>(first->type.shape->size());
  return a->i < 0 ? a->i + rank : a->i;
}

// The x of `v` = Slice(x, [-(p + 1)], [-1], [axis]) with steps 1 or absent, p >= 1: torch
// 1.13's wrap before x, where x[-p:] is PyTorch's (null for anything else).
const Value* misplaced_wrap_source(const Value* v, int64_t axis, int64_t rank) {
  const Node* s = v ? v->producer : nullptr;
  if (!s || s->op_type != "Slice" || !s->domain.empty() || s->inputs.empty()) return nullptr;
  const auto starts = constant_ints(*s, 1), ends = constant_ints(*s, 2),
             axes = constant_ints(*s, 3);
  if (!starts || !ends || !axes || starts->size() != 1 || ends->size() != 1 || axes->size() != 1)
    return nullptr;
  if (s->inputs.size() > 4 && s->inputs[4]) {
    const auto steps = constant_ints(*s, 4);
    if (!steps || *steps != std::vector<int64_t>{1}) return nullptr;
  }
  const int64_t sliced_axis = (*axes)[0] < 0 ? (*axes)[0] + rank : (*axes)[0];
  const bool wrap = sliced_axis == axis && (*ends)[0] == -1 && (*starts)[0] <= -2;
  return wrap ? s->inputs[0] : nullptr;
}

// Whether `v` is x or, where torch crops first (a negative pad), a Slice of x.
bool is_padded_body(const Value* v, const Value* x) {
  if (v == x) return true;
  const Node* s = v ? v->producer : nullptr;
  return s && s->op_type == "Slice" && s->domain.empty() && !s->inputs.empty() && s->inputs[0] == x;
}

void check_graph(const ir::Graph& g) {
  for (const auto& n : g.nodes) {
    if (n->op_type != "Concat" || !n->domain.empty() || n->inputs.size() < 2) continue;
    const auto axis = concat_axis(*n);
    if (!axis) continue;
    const auto rank = static_cast<int64_t>(n->inputs[0]->type.shape->size());
    const Value* x = misplaced_wrap_source(n->inputs[0], *axis, rank);
    if (!x || !is_padded_body(n->inputs[1], x)) continue;
    throw Error("node " + n->label() +
                ": this is torch.onnx.export's circular padding (padding_mode='circular' or "
                "F.pad(mode='circular')), which torch 1.13 writes wrongly: it wraps "
                "x[-(p+1):-1] where PyTorch pads with x[-p:], so the file is not the model; "
                "export with ampc.export (Python), which writes it as PyTorch computes it");
  }
}

}  // namespace

void refuse_misexported_circular_pad(const ir::Model& model) {
  if (model.producer_name != "pytorch" || !model.graph) return;
  check_graph(*model.graph);
}

}  // namespace ampc::passes
