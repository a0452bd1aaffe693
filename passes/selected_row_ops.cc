#include "passes/selected_row_ops.h"

#include <algorithm>
#include <set>
#include <string>

#include "ir/tensor.h"
#include "ops/op_info.h"
#include "passes/autodiff/grad_builder.h"
#include "passes/reduce_axes.h"

namespace ampc::passes::selected_rows {
namespace {

using autodiff::attrs;
using autodiff::GradBuilder;
using ir::Node;
using ir::Value;

bool is_op(const Node& n, const char* op) {
  return n.domain.empty() && n.op_type == op;
}

bool is_reduce(const Node& n) {
  static const std::set<std::string> kReduce = {"ReduceSum", "ReduceMean",      "ReduceMax",
                                                "ReduceMin", "ReduceProd",      "ReduceL1",
                                                "ReduceL2",  "ReduceSumSquare", "ReduceLogSumExp"};
  return n.domain.empty() && kReduce.count(n.op_type);
}

std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[out.size() - 1 - i] = x == 1 ? y : x;
  }
  return out;
}

int64_t int_attr(const Node& n, const char* name, int64_t fallback) {
  const ir::Attribute* a = n.attr(name);
  return a ? a->i : fallback;
}

float float_attr(const Node& n, const char* name, float fallback) {
  const ir::Attribute* a = n.attr(name);
  return a ? a->f : fallback;
}

void set_int_attr(Node& n, const std::string& name, int64_t v) {
  for (auto& a : n.attributes) {
    if (a.name == name) {
      a.i = v;
      return;
    }
  }
  n.attributes.push_back(ir::Attribute::make_int(name, v));
}

// The selected value's trailing shape when only input `k` is selected and the others are not.
const Shape* only_selected(const std::vector<const Shape*>& trailing, size_t k) {
  for (size_t i = 0; i < trailing.size(); ++i) {
    if ((i == k) != (trailing[i] != nullptr)) return nullptr;
  }
  return k < trailing.size() ? trailing[k] : nullptr;
}

// Elementwise: the selected inputs share one trailing rank; the others broadcast over the
// trailing dimensions only ([1, d...] beside [K, d...] broadcasts as beside [mask..., d...]).
std::optional<Shape> elementwise(const Node& n, const std::vector<const Shape*>& trailing) {
  std::optional<size_t> rank;
  for (const Shape* t : trailing) {
    if (!t) continue;
    if (rank && *rank != t->size()) return std::nullopt;
    rank = t->size();
  }
  std::optional<Shape> out = Shape{};
  for (size_t k = 0; k < n.inputs.size() && out; ++k) {
    const Value* in = n.inputs[k];
    if (!in) continue;
    if (trailing[k]) {
      out = broadcast(*out, *trailing[k]);
      continue;
    }
    if (!in->type.is_static()) return std::nullopt;
    Shape s = *in->type.shape;
    if (s.size() == *rank + 1 && s[0] == 1) s.erase(s.begin());
    if (s.size() > *rank) return std::nullopt;
    out = broadcast(*out, s);
  }
  return out;
}

// The axis of a Softmax / LogSoftmax in the selected value's rank: it must not be the first.
std::optional<Shape> softmax(const Node& n, const Shape& t, int64_t opset) {
  const int64_t rank = static_cast<int64_t>(t.size()) + 1;
  int64_t axis = int_attr(n, "axis", opset >= 13 ? -1 : 1);
  if (axis < 0) axis += rank;
  if (axis < 1 || axis >= rank) return std::nullopt;
  return t;
}

// A reduction over trailing axes only.
std::optional<Shape> trailing_reduce(const Node& n, const Shape& t) {
  const auto axes = reduce_axes(n, t.size() + 1);
  if (!axes || axes->empty() || axes->front() == 0) return std::nullopt;
  const bool keep = int_attr(n, "keepdims", 1) != 0;
  Shape out;
  for (size_t i = 1; i <= t.size(); ++i) {
    const bool reduced = std::count(axes->begin(), axes->end(), static_cast<int64_t>(i)) > 0;
    if (!reduced) out.push_back(t[i - 1]);
    if (reduced && keep) out.push_back(1);
  }
  return out;
}

// Gather along a trailing axis by indices that are not selected: t[:axis] + indices + t[axis:].
std::optional<Shape> trailing_gather(const Node& n, const Shape& t) {
  const Value* indices = n.inputs.size() > 1 ? n.inputs[1] : nullptr;
  if (!indices || !indices->type.is_static()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(t.size()) + 1;
  int64_t axis = int_attr(n, "axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 1 || axis >= rank) return std::nullopt;
  Shape out(t.begin(), t.begin() + (axis - 1));
  out.insert(out.end(), indices->type.shape->begin(), indices->type.shape->end());
  out.insert(out.end(), t.begin() + axis, t.end());
  return out;
}

// Slice of trailing axes only (constant starts, ends, axes and steps; its output's static
// shape gives the trailing shape).
std::optional<Shape> trailing_slice(const Node& n, const Shape& t) {
  if (n.inputs.size() < 4 || !n.inputs[3] || !n.inputs[3]->initializer) return std::nullopt;
  const auto axes = ir::int_values(*n.inputs[3]->initializer);
  const Value* out = n.outputs[0];
  if (!axes || !out->type.shape || out->type.shape->size() != t.size() + 1) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(t.size()) + 1;
  for (int64_t a : *axes) {
    if ((a < 0 ? a + rank : a) < 1) return std::nullopt;
  }
  Shape trailing(out->type.shape->begin() + 1, out->type.shape->end());
  if (std::any_of(trailing.begin(), trailing.end(), [](int64_t d) { return d < 0; }))
    return std::nullopt;
  return trailing;
}

// Selected rows [K, d] times a matrix [d, e]: MatMul, or Gemm without transA.
std::optional<Shape> rows_by_matrix(const Node& n, const Shape& t) {
  const Value* w = n.inputs[1];
  if (t.size() != 1 || !w || !w->type.is_static() || w->type.shape->size() != 2)
    return std::nullopt;
  if (is_op(n, "Gemm") && int_attr(n, "transA", 0) != 0) return std::nullopt;
  const bool trans_b = is_op(n, "Gemm") && int_attr(n, "transB", 0) != 0;
  const Shape& ws = *w->type.shape;
  if (ws[trans_b ? 1 : 0] != t[0]) return std::nullopt;
  const Shape out{ws[trans_b ? 0 : 1]};
  if (is_op(n, "Gemm") && n.inputs.size() > 2 && n.inputs[2]) {
    const Value* c = n.inputs[2];
    if (!c->type.is_static() || c->type.shape->size() > 1) return std::nullopt;  // a row bias
    if (!broadcast(out, *c->type.shape)) return std::nullopt;
  }
  return out;
}

// The axes of a trailing reduction in the in-place form: non-negative ones move by
// mask_rank - 1, negative ones count from the end as before.
std::vector<int64_t> moved_axes(const Node& n, size_t rank, size_t mask_rank) {
  const auto axes = reduce_axes(n, rank);  // output_trailing checked that they are known
  std::vector<int64_t> moved;
  for (int64_t a : *axes) moved.push_back(a + static_cast<int64_t>(mask_rank) - 1);
  return moved;
}

}  // namespace

std::optional<Shape> output_trailing(const Node& n, const std::vector<const Shape*>& trailing,
                                     int64_t opset) {
  if (n.outputs.size() != 1 || !n.outputs[0]) return std::nullopt;
  const ops::OpInfo* info = ops::find_op_info(n.domain, n.op_type);
  if (info && info->pattern == ops::Pattern::kElementwise) return elementwise(n, trailing);
  if (is_op(n, "Softmax") || is_op(n, "LogSoftmax")) {
    const Shape* t = only_selected(trailing, 0);
    return t ? softmax(n, *t, opset) : std::nullopt;
  }
  if (is_reduce(n)) {
    const Shape* t = only_selected(trailing, 0);
    return t ? trailing_reduce(n, *t) : std::nullopt;
  }
  if (is_op(n, "MatMul") || is_op(n, "Gemm")) {
    const Shape* t = only_selected(trailing, 0);
    return t ? rows_by_matrix(n, *t) : std::nullopt;
  }
  if (is_op(n, "Gather")) {
    const Shape* t = only_selected(trailing, 0);
    return t ? trailing_gather(n, *t) : std::nullopt;
  }
  if (is_op(n, "Slice")) {
    const Shape* t = only_selected(trailing, 0);
    return t ? trailing_slice(n, *t) : std::nullopt;
  }
  return std::nullopt;
}

void adapt(ir::Graph& g, Node* n, size_t mask_rank, const ir::TensorType& dense_output,
           int64_t opset) {
  const int64_t shift = static_cast<int64_t>(mask_rank) - 1;
  if (is_op(*n, "Softmax") || is_op(*n, "LogSoftmax")) {
    // Before opset 13 the default axis is 1 (and flattens from there, which the in-place form
    // does from the same dimension on).
    const int64_t axis = int_attr(*n, "axis", opset >= 13 ? -1 : 1);
    if (axis >= 0) set_int_attr(*n, "axis", axis + shift);
  } else if (is_op(*n, "Gather")) {
    const int64_t axis = int_attr(*n, "axis", 0);
    if (axis >= 0) set_int_attr(*n, "axis", axis + shift);
  } else if (is_op(*n, "Slice")) {
    // Non-negative axes move past the mask's dimensions; negative ones count from the end.
    std::vector<int64_t> axes = *ir::int_values(*n->inputs[3]->initializer);
    for (int64_t& a : axes) a += a >= 0 ? shift : 0;
    GradBuilder b(g, n->name + "/in_place");
    ir::set_input(n, 3, b.ints(axes));
  } else if (is_reduce(*n)) {
    // The input is already in place: its rank before was mask_rank - 1 less.
    const size_t rank = n->inputs[0]->type.shape->size() - mask_rank + 1;
    const std::vector<int64_t> axes = moved_axes(*n, rank, mask_rank);
    if (n->inputs.size() > 1 && n->inputs[1]) {
      GradBuilder b(g, n->name + "/in_place");
      ir::set_input(n, 1, b.ints(axes));
    } else {
      for (auto& a : n->attributes) {
        if (a.name == "axes") a.ints = axes;
      }
    }
  } else if (is_op(*n, "Gemm")) {
    // alpha * A @ op(B) + beta * C as MatMul, Mul and Add (Gemm takes matrices only).
    Value* a = n->inputs[0];
    Value* w = n->inputs[1];
    const size_t first_new = g.nodes.size();
    GradBuilder b(g, n->name + "/in_place");
    if (int_attr(*n, "transB", 0) != 0) w = b.transpose_last(w);
    Value* y = b.op("MatMul", {a, w}, dense_output);
    const float alpha = float_attr(*n, "alpha", 1.0f), beta = float_attr(*n, "beta", 1.0f);
    if (alpha != 1.0f) y = b.op("Mul", {y, b.scalar(alpha, dense_output.dtype)}, dense_output);
    if (n->inputs.size() > 2 && n->inputs[2]) {
      Value* c = n->inputs[2];
      if (beta != 1.0f) c = b.op("Mul", {c, b.scalar(beta, c->type.dtype)}, c->type);
      y = b.op("Add", {y, c}, dense_output);
    }
    Value* out = n->outputs[0];
    ir::replace_by_appended(g, n, first_new, y);
    out->type = dense_output;
    return;
  }
  n->outputs[0]->type = dense_output;
}

}  // namespace ampc::passes::selected_rows
