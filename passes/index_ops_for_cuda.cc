#include "passes/index_ops_for_cuda.h"

#include <set>
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

int64_t axis_of(const ir::Node& n, size_t rank) {
  const ir::Attribute* a = n.attr("axis");
  const int64_t axis = a ? a->i : 0;
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

// The flat offsets GatherElements and ScatterElements address, an index out of range past the
// end of the data.
Value* checked_element_offsets(GradBuilder& b, const ir::Node& n) {
  const Shape& d = *n.inputs[0]->type.shape;
  const int64_t axis = axis_of(n, d.size());
  Value* idx = b.cast(n.inputs[1], DType::kInt64);
  return autodiff::past_end_where(b, autodiff::out_of_range(b, idx, d[static_cast<size_t>(axis)]),
                                  autodiff::element_offsets(b, d, axis, idx), ir::shape_numel(d));
}

Value* gather_elements(GradBuilder& b, const ir::Node& n) {
  Value* x = n.inputs[0];
  const Shape& d = *x->type.shape;
  return b.op("Gather", {b.reshape(x, {ir::shape_numel(d)}), checked_element_offsets(b, n)},
              n.outputs[0]->type);
}

Value* scatter_elements(GradBuilder& b, const ir::Node& n) {
  Value* x = n.inputs[0];
  const Shape& d = *x->type.shape;
  const int64_t count = ir::shape_numel(*n.inputs[1]->type.shape);
  Value* offsets = b.reshape(checked_element_offsets(b, n), {count, 1});
  const ir::Attribute* r = n.attr("reduction");
  const Shape flat{ir::shape_numel(d)};
  Value* out = b.op("ScatterND", {b.reshape(x, flat), offsets, b.reshape(n.inputs[2], {count})},
                    {x->type.dtype, flat},
                    attrs(ir::Attribute::make_string("reduction", r ? r->s : "none")));
  return b.reshape(out, d);
}

// GatherND: a Gather of the rows of data viewed as [rows, slice] that the tuples name
// (autodiff::nd_rows). Tuples of length 0 are left as they are.
Value* gather_nd(GradBuilder& b, const ir::Node& n) {
  Value* x = n.inputs[0];
  const ir::Attribute* a = n.attr("batch_dims");
  const auto nd = autodiff::nd_rows(b, *x->type.shape, b.cast(n.inputs[1], DType::kInt64),
                                    a ? static_cast<size_t>(a->i) : 0);
  if (!nd) return nullptr;
  Shape gathered = *nd->rows->type.shape;
  gathered.push_back(nd->slice);
  Value* out = b.op("Gather", {b.reshape(x, {nd->count, nd->slice}), nd->rows},
                    {x->type.dtype, gathered}, attrs(ir::Attribute::make_int("axis", 0)));
  return b.reshape(out, *n.outputs[0]->type.shape);
}

// OneHot: the indices (float ones truncated, as the CPU op reads them; negative ones counted
// from the end) compared with
// 0..depth-1 along the new axis, and a Where between the on and off values. An index outside
// [-depth, depth) matches nothing and gives a row of off values, as the op's definition says.
Value* one_hot(GradBuilder& b, const ir::Node& n) {
  Value* idx = n.inputs[0];
  Value* values = n.inputs[2];
  if (idx->type.dtype == DType::kBool) return nullptr;
  const Shape& out = *n.outputs[0]->type.shape;
  const ir::Attribute* given = n.attr("axis");  // -1 when absent
  const int64_t axis = given ? given->i : -1;
  const auto a = static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(out.size()) : axis);
  const int64_t depth = out[a];
  Shape spread = *idx->type.shape;
  spread.insert(spread.begin() + static_cast<std::ptrdiff_t>(a), 1);
  Shape along(out.size(), 1);
  along[a] = depth;
  std::vector<int64_t> positions(static_cast<size_t>(depth));
  for (int64_t i = 0; i < depth; ++i) positions[static_cast<size_t>(i)] = i;
  Value* hit = b.op("Equal",
                    {b.reshape(autodiff::wrapped_indices(b, idx, depth), spread),
                     b.reshape(b.ints(positions), along)},
                    {DType::kBool, out});
  auto value = [&](int64_t k) {
    return b.op("Gather", {values, b.scalar(static_cast<double>(k), DType::kInt64)},
                {values->type.dtype, Shape{}}, attrs(ir::Attribute::make_int("axis", 0)));
  };
  return b.op("Where", {hit, value(1), value(0)}, n.outputs[0]->type);
}

// The diagonal offset of a Trilu, when it is constant.
bool trilu_k(const ir::Node& n, int64_t& k) {
  k = 0;
  if (n.inputs.size() < 2 || !n.inputs[1]) return true;
  const ir::Tensor* t = n.inputs[1]->initializer.get();
  const auto values = t ? ir::int_values(*t) : std::nullopt;
  if (!values || values->size() != 1) return false;
  k = (*values)[0];
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

// EyeLike (torch's .diagonal() exports as x times one): ones where column - row = k, in the
// output's type, from a constant mask of its static shape as Trilu's.
Value* eye_like(GradBuilder& b, const ir::Node& n) {
  const ir::TensorType& out = n.outputs[0]->type;
  const Shape& d = *out.shape;
  if (d.size() != 2) return nullptr;
  const ir::Attribute* ka = n.attr("k");
  const int64_t k = ka ? ka->i : 0;
  std::vector<int64_t> on(static_cast<size_t>(d[0] * d[1]));
  for (int64_t i = 0; i < d[0]; ++i)
    for (int64_t j = 0; j < d[1]; ++j) on[static_cast<size_t>(i * d[1] + j)] = j - i == k;
  Value* mask =
      b.op("Equal", {b.reshape(b.ints(on), d), b.scalar(1, DType::kInt64)}, {DType::kBool, d});
  return b.op("Where", {mask, b.scalar(1.0, out.dtype), b.scalar(0.0, out.dtype)}, out);
}

// Tile with constant repeats r: x [d0, d1, ..] viewed as [1, d0, 1, d1, ..], expanded to
// [r0, d0, r1, d1, ..] and viewed as [r0 d0, r1 d1, ..]: the copies in the order Tile writes.
Value* tile(GradBuilder& b, const ir::Node& n) {
  const ir::Tensor* t =
      n.inputs.size() > 1 && n.inputs[1] ? n.inputs[1]->initializer.get() : nullptr;
  Value* x = n.inputs[0];
  const Shape& d = *x->type.shape;
  const auto repeats = t ? ir::int_values(*t) : std::nullopt;
  if (!repeats || repeats->size() != d.size()) return nullptr;
  Shape spread, expanded;
  for (size_t i = 0; i < d.size(); ++i) {
    spread.insert(spread.end(), {1, d[i]});
    expanded.insert(expanded.end(), {(*repeats)[i], d[i]});
  }
  Value* wide = b.op("Expand", {b.reshape(x, spread), b.ints(expanded)}, {x->type.dtype, expanded});
  return b.reshape(wide, *n.outputs[0]->type.shape);
}

}  // namespace

int index_ops_for_cuda(ir::Model& model) {
  ir::Graph& g = *model.graph;
  std::vector<ir::Node*> todo;
  for (const auto& n : g.nodes) {
    static const std::set<std::string> kOps = {
        "GatherElements", "ScatterElements", "GatherND", "OneHot", "Trilu", "Tile", "EyeLike"};
    const bool ours = n->domain.empty() && kOps.count(n->op_type) > 0;
    if (ours && ir::has_static_types(*n)) todo.push_back(n.get());
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
    } else if (n->op_type == "GatherND") {
      result = gather_nd(b, *n);
    } else if (n->op_type == "OneHot") {
      result = one_hot(b, *n);
    } else if (n->op_type == "Tile") {
      result = tile(b, *n);
    } else if (n->op_type == "EyeLike") {
      result = eye_like(b, *n);
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
