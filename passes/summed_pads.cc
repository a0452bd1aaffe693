#include "passes/summed_pads.h"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "ir/node_match.h"
#include "passes/autodiff/grad_builder.h"
#include "passes/constant_folding.h"
#include "passes/dead_code_elimination.h"
#include "passes/sum_trees.h"

namespace ampc::passes {
namespace {

using ir::Node;
using ir::Value;

bool is_sum(const Node* n) {
  return is_plain_sum(n) && is_float(n->outputs[0]->type.dtype);
}

// A term's part: placed at [begin, begin + its size) of the sum's axis `axis`.
struct Part {
  Value* x = nullptr;
  size_t axis = 0;
  int64_t begin = 0;
};

// Whether Pad `n` fills with zeros in constant mode (an omitted value, or a constant 0).
bool pads_with_zeros(const Node& n, const std::set<const Value*>& variable) {
  const ir::Attribute* mode = n.attr("mode");
  if (mode && mode->s != "constant") return false;
  if (n.inputs.size() > 3) return false;  // opset 18's axes: not written by autodiff
  if (n.inputs.size() < 3 || !n.inputs[2]) return true;
  const ir::Tensor* value = fixed_data(n.inputs[2], variable);
  const auto f = value ? ir::float_scalar(*value) : std::nullopt;
  return f && *f == 0.0;
}

// The part that term `y` places along one axis: y = Pad(x, pads) of zeros, pads zero outside
// one axis, of y's dtype.
std::optional<Part> as_part(const Value* y, const std::set<const Value*>& variable) {
  const Node* n = y->producer;
  if (!ir::is_onnx_op(n, "Pad") || n->inputs.size() < 2 || n->outputs.size() != 1) return {};
  Value* x = n->inputs[0];
  if (!x || !x->type.is_static() || x->type.dtype != y->type.dtype) return {};
  if (!pads_with_zeros(*n, variable)) return {};
  const ir::Tensor* pads_data = fixed_data(n->inputs[1], variable);
  const auto pads = pads_data ? ir::int_values(*pads_data) : std::nullopt;
  const size_t rank = x->type.shape->size();
  if (!pads || pads->size() != 2 * rank) return {};
  std::optional<Part> part;
  for (size_t a = 0; a < rank; ++a) {
    const int64_t before = (*pads)[a], after = (*pads)[a + rank];
    if (before < 0 || after < 0) return {};
    if (before == 0 && after == 0) continue;
    if (part) return {};  // a second padded axis
    part = Part{x, a, before};
  }
  return part;
}

// The parts of the terms in the order of their places when they tile one axis of `y`
// exactly; empty otherwise.
std::vector<Part> tiling(const std::vector<Value*>& terms, const Value* y,
                         const std::set<const Value*>& variable) {
  std::vector<Part> parts;
  for (const Value* t : terms) {
    const auto part = as_part(t, variable);
    if (!part || (!parts.empty() && part->axis != parts[0].axis)) return {};
    parts.push_back(*part);
  }
  if (parts.size() < 2) return {};
  std::sort(parts.begin(), parts.end(),
            [](const Part& a, const Part& b) { return a.begin < b.begin; });
  const size_t axis = parts[0].axis;
  int64_t end = 0;
  for (const Part& p : parts) {
    if (p.begin != end) return {};  // a gap or an overlap
    end += (*p.x->type.shape)[axis];
  }
  if (end != (*y->type.shape)[axis]) return {};
  return parts;
}

void concat_parts(ir::Graph& g, Node* root, const std::vector<Part>& parts) {
  std::vector<Value*> xs;
  for (const Part& p : parts) xs.push_back(p.x);
  const size_t first_new = g.nodes.size();
  autodiff::GradBuilder b(g, root->name + "/concat");
  Value* y =
      b.op("Concat", xs, root->outputs[0]->type,
           autodiff::attrs(ir::Attribute::make_int("axis", static_cast<int64_t>(parts[0].axis))));
  ir::replace_by_appended(g, root, first_new, y);
}

}  // namespace

int concat_summed_pads(ir::Model& model) {
  ir::Graph& g = *model.graph;
  const std::set<const Value*> kept = kept_values(model);
  const std::set<const Value*> variable = variable_values(model);
  std::vector<Node*> roots;
  for (const auto& n : g.nodes) {
    if (is_sum_root(n.get(), is_sum, kept)) roots.push_back(n.get());
  }
  int rewritten = 0;
  for (Node* root : roots) {
    const std::vector<Part> parts =
        tiling(sum_terms(root, is_sum, kept), root->outputs[0], variable);
    if (parts.empty()) continue;
    concat_parts(g, root, parts);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace ampc::passes
