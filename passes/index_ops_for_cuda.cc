#include "passes/index_ops_for_cuda.h"

#include <cstring>
#include <string>
#include <vector>

#include "passes/autodiff/grad_builder.h"
#include "passes/autodiff/index_offsets.h"

namespace ampc::passes {
namespace {

using autodiff::attrs;
using autodiff::GradBuilder;
using ir::Value;
using Shape = std::vector<int64_t>;

bool all_static(const ir::Node& n) {
  for (const Value* v : n.inputs) {
    if (v && !v->type.is_static()) return false;
  }
  return n.outputs.size() == 1 && n.outputs[0] && n.outputs[0]->type.is_static();
}

int64_t axis_of(const ir::Node& n, size_t rank) {
  const ir::Attribute* a = n.attr("axis");
  const int64_t axis = a ? a->i : 0;
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

Value* gather_elements(GradBuilder& b, const ir::Node& n) {
  Value* x = n.inputs[0];
  const Shape& d = *x->type.shape;
  Value* offsets = autodiff::element_offsets(b, d, axis_of(n, d.size()), n.inputs[1]);
  return b.op("Gather", {b.reshape(x, {ir::shape_numel(d)}), offsets}, n.outputs[0]->type);
}

Value* scatter_elements(GradBuilder& b, const ir::Node& n) {
  Value* x = n.inputs[0];
  const Shape& d = *x->type.shape;
  const int64_t count = ir::shape_numel(*n.inputs[1]->type.shape);
  Value* offsets =
      b.reshape(autodiff::element_offsets(b, d, axis_of(n, d.size()), n.inputs[1]), {count, 1});
  const ir::Attribute* r = n.attr("reduction");
  const Shape flat{ir::shape_numel(d)};
  Value* out = b.op("ScatterND", {b.reshape(x, flat), offsets, b.reshape(n.inputs[2], {count})},
                    {x->type.dtype, flat},
                    attrs(ir::Attribute::make_string("reduction", r ? r->s : "none")));
  return b.reshape(out, d);
}

// The diagonal offset of a Trilu, when it is constant.
bool trilu_k(const ir::Node& n, int64_t& k) {
  k = 0;
  if (n.inputs.size() < 2 || !n.inputs[1]) return true;
  const ir::Tensor* t = n.inputs[1]->initializer.get();
  if (!t || t->numel() != 1 || t->dtype != DType::kInt64) return false;
  std::memcpy(&k, t->bytes.data(), 8);
  return true;
}

Value* trilu(GradBuilder& b, const ir::Node& n, int64_t k) {
  Value* x = n.inputs[0];
  const Shape& d = *x->type.shape;
  const int64_t rows = d[d.size() - 2], cols = d.back();
  const ir::Attribute* u = n.attr("upper");
  const bool upper = !u || u->i != 0;
  // The mask as int64 0/1 (GradBuilder::ints), compared once with 1 into bools.
  std::vector<int64_t> keep(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      keep[static_cast<size_t>(i * cols + j)] = upper ? j - i >= k : j - i <= k;
  Value* mask = b.op("Equal", {b.reshape(b.ints(keep), {rows, cols}), b.scalar(1, DType::kInt64)},
                     {DType::kBool, Shape{rows, cols}});
  return b.op("Where", {mask, x, b.scalar(0.0, x->type.dtype)}, x->type);
}

// Tile with constant repeats r: x [d0, d1, ..] viewed as [1, d0, 1, d1, ..], expanded to
// [r0, d0, r1, d1, ..] and viewed as [r0 d0, r1 d1, ..]: the copies in the order Tile writes.
Value* tile(GradBuilder& b, const ir::Node& n) {
  const ir::Tensor* t =
      n.inputs.size() > 1 && n.inputs[1] ? n.inputs[1]->initializer.get() : nullptr;
  Value* x = n.inputs[0];
  const Shape& d = *x->type.shape;
  if (!t || t->dtype != DType::kInt64 || t->numel() != static_cast<int64_t>(d.size()))
    return nullptr;
  Shape spread, expanded;
  for (size_t i = 0; i < d.size(); ++i) {
    int64_t r;
    std::memcpy(&r, t->bytes.data() + 8 * i, 8);
    spread.insert(spread.end(), {1, d[i]});
    expanded.insert(expanded.end(), {r, d[i]});
  }
  Value* wide = b.op("Expand", {b.reshape(x, spread), b.ints(expanded)}, {x->type.dtype, expanded});
  return b.reshape(wide, *n.outputs[0]->type.shape);
}

}  // namespace

int index_ops_for_cuda(ir::Model& model) {
  ir::Graph& g = *model.graph;
  std::vector<ir::Node*> todo;
  for (const auto& n : g.nodes) {
    const bool ours =
        n->domain.empty() && (n->op_type == "GatherElements" || n->op_type == "ScatterElements" ||
                              n->op_type == "Trilu" || n->op_type == "Tile");
    if (ours && all_static(*n)) todo.push_back(n.get());
  }
  int rewritten = 0;
  for (ir::Node* n : todo) {
    GradBuilder b(g, (n->name.empty() ? n->op_type : n->name) + "/cuda");
    const size_t first_new = g.nodes.size();
    Value* result = nullptr;
    int64_t k = 0;
    if (n->op_type == "GatherElements") {
      result = gather_elements(b, *n);
    } else if (n->op_type == "ScatterElements") {
      result = scatter_elements(b, *n);
    } else if (n->op_type == "Tile") {
      result = tile(b, *n);
    } else if (trilu_k(*n, k) && n->inputs[0]->type.shape->size() >= 2) {
      result = trilu(b, *n, k);
    }
    if (!result) continue;
    ir::replace_by_appended(g, n, first_new, result);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace ampc::passes
