#include "passes/boolean_mask_selection.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ops/op_info.h"
#include "passes/autodiff/grad_builder.h"
#include "passes/common_subexpression.h"
#include "passes/reduce_axes.h"

namespace ampc::passes {
namespace {

using autodiff::attrs;
using autodiff::GradBuilder;
using ir::Node;
using ir::Value;
using Shape = std::vector<int64_t>;

bool is_op(const Node* n, const char* op) {
  return n && n->domain.empty() && n->op_type == op;
}

// numpy broadcasting of two static shapes; nothing when they do not broadcast.
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

// x[mask]: GatherND(x, Transpose(NonZero(mask), perm [1, 0])), batch_dims 0, with a static bool
// mask whose shape starts x's static shape.
struct Selection {
  Node* gather;
  Node* transpose;
  Node* nonzero;
  Value* mask() const { return nonzero->inputs[0]; }
};

std::optional<Selection> as_selection(Node* gather) {
  if (!is_op(gather, "GatherND") || gather->inputs.size() < 2) return std::nullopt;
  if (const ir::Attribute* b = gather->attr("batch_dims"); b && b->i != 0) return std::nullopt;
  Value* x = gather->inputs[0];
  Node* t = gather->inputs[1] ? gather->inputs[1]->producer : nullptr;
  if (!is_op(t, "Transpose")) return std::nullopt;
  const ir::Attribute* perm = t->attr("perm");
  if (!perm || perm->ints != Shape{1, 0}) return std::nullopt;
  Node* nz = t->inputs[0] ? t->inputs[0]->producer : nullptr;
  if (!is_op(nz, "NonZero")) return std::nullopt;
  const Value* m = nz->inputs[0];
  if (!m || m->type.dtype != DType::kBool || !m->type.is_static() || !x || !x->type.is_static())
    return std::nullopt;
  const Shape& ms = *m->type.shape;
  const Shape& xs = *x->type.shape;
  if (ms.empty() || ms.size() > xs.size() || !std::equal(ms.begin(), ms.end(), xs.begin()))
    return std::nullopt;
  return Selection{gather, t, nz};
}

bool is_graph_output(const ir::Graph& g, const Value* v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

// The selections by one mask and everything their selected elements reach: elementwise ops
// (their outputs are selected values too) and the terminals (a sum or mean over all, a loss).
class Group {
 public:
  Group(ir::Graph& g, Value* mask) : g_(g), mask_(mask) {}

  void add(const Selection& s) {
    selections_.push_back(s);
    const Shape& xs = *s.gather->inputs[0]->type.shape;
    trailing_[s.gather->outputs[0]] = Shape(xs.begin() + mask_rank(), xs.end());
  }

  // Follows the selected values through the graph (in its order); false when a use does not
  // fit (the group is then left alone).
  bool classify() {
    for (const auto& n : g_.nodes) {
      if (std::none_of(n->inputs.begin(), n->inputs.end(), [&](Value* v) { return selected(v); }))
        continue;
      if (!classify_elementwise(*n) && !is_full_reduction(*n) && !is_row_loss(*n)) return false;
    }
    // Every use of a selected value must be one of the nodes classified (not a subgraph's).
    for (const auto& [v, trailing] : trailing_) {
      if (is_graph_output(g_, v)) return false;
      for (const ir::Use& u : v->uses) {
        if (!classified_.count(u.node)) return false;
      }
    }
    return !terminals_.empty();
  }

  void rewrite() {
    for (const Selection& s : selections_) rewrite_selection(s);
    for (Node* n : elementwise_) {
      std::optional<Shape> shape = Shape{};
      for (const Value* in : n->inputs) {
        if (in && shape) shape = broadcast(*shape, *in->type.shape);
      }
      n->outputs[0]->type.shape = *shape;  // the inputs broadcast: classify checked them
    }
    for (Node* t : terminals_) {
      if (is_op(t, "ReduceSum") || is_op(t, "ReduceMean"))
        rewrite_reduction(t);
      else
        rewrite_loss(t);
    }
    std::vector<Node*> dead;
    for (const Selection& s : selections_) {
      if (s.transpose->outputs[0]->uses.empty() &&
          std::find(dead.begin(), dead.end(), s.transpose) == dead.end())
        dead.push_back(s.transpose);
    }
    for (const Selection& s : selections_) {
      const auto& uses = s.nonzero->outputs[0]->uses;
      const bool only_dead = std::all_of(uses.begin(), uses.end(), [&](const ir::Use& u) {
        return std::find(dead.begin(), dead.end(), u.node) != dead.end();
      });
      if (only_dead && std::find(dead.begin(), dead.end(), s.nonzero) == dead.end())
        dead.push_back(s.nonzero);
    }
    g_.remove_nodes(dead);
  }

 private:
  size_t mask_rank() const { return mask_->type.shape->size(); }
  const Shape& mask_shape() const { return *mask_->type.shape; }
  int64_t mask_numel() const { return ir::shape_numel(mask_shape()); }
  bool selected(const Value* v) const { return v && trailing_.count(v); }

  // An elementwise op of selected values (one trailing rank) and of values that broadcast over
  // their trailing dimensions only: its output is selected.
  bool classify_elementwise(Node& n) {
    const ops::OpInfo* info = ops::find_op_info(n.domain, n.op_type);
    if (!info || info->pattern != ops::Pattern::kElementwise || n.outputs.size() != 1) return false;
    std::optional<size_t> rank;
    for (const Value* in : n.inputs) {
      if (!selected(in)) continue;
      const size_t r = trailing_.at(in).size();
      if (rank && *rank != r) return false;
      rank = r;
    }
    std::optional<Shape> trailing = Shape{};
    for (const Value* in : n.inputs) {
      if (!in) continue;
      if (selected(in)) {
        trailing = broadcast(*trailing, trailing_.at(in));
      } else {
        if (!in->type.is_static()) return false;
        Shape s = *in->type.shape;
        // [1, d...] beside [K, d...] broadcasts the same way beside [mask dims..., d...].
        if (s.size() == *rank + 1 && s[0] == 1) s.erase(s.begin());
        if (s.size() > *rank) return false;
        trailing = broadcast(*trailing, s);
      }
      if (!trailing) return false;
    }
    trailing_[n.outputs[0]] = *trailing;
    elementwise_.push_back(&n);
    classified_.insert(&n);
    return true;
  }

  // ReduceSum / ReduceMean of one selected float value over all of its axes.
  bool is_full_reduction(Node& n) {
    if (!is_op(&n, "ReduceSum") && !is_op(&n, "ReduceMean")) return false;
    const Value* x = n.inputs[0];
    if (!selected(x) || !is_float(x->type.dtype) || !n.outputs[0]->type.is_static()) return false;
    for (size_t k = 1; k < n.inputs.size(); ++k) {
      if (selected(n.inputs[k])) return false;
    }
    const size_t rank = trailing_.at(x).size() + 1;
    const auto axes = reduce_axes(n, rank);
    if (!axes || axes->size() != rank) return false;
    terminals_.push_back(&n);
    classified_.insert(&n);
    return true;
  }

  // SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss of selected rows [K, C] and selected
  // labels [K], reduction mean or sum, its log-probability output unused.
  bool is_row_loss(Node& n) {
    if (!is_op(&n, "SoftmaxCrossEntropyLoss") && !is_op(&n, "NegativeLogLikelihoodLoss"))
      return false;
    if (n.inputs.size() < 2 || !selected(n.inputs[0]) || !selected(n.inputs[1])) return false;
    if (trailing_.at(n.inputs[0]).size() != 1 || !trailing_.at(n.inputs[1]).empty()) return false;
    if (n.inputs.size() > 2 && selected(n.inputs[2])) return false;
    const ir::Attribute* r = n.attr("reduction");
    if (r && r->s == "none") return false;
    for (size_t k = 1; k < n.outputs.size(); ++k) {
      if (n.outputs[k] && (!n.outputs[k]->uses.empty() || is_graph_output(g_, n.outputs[k])))
        return false;
    }
    terminals_.push_back(&n);
    classified_.insert(&n);
    return true;
  }

  // The mask as a [mask dims..., 1...] of rank `rank`, to broadcast over trailing dimensions.
  Value* mask_for(GradBuilder& b, size_t rank) {
    Shape s = mask_shape();
    s.resize(rank, 1);
    return b.reshape(mask_, s);
  }

  // x[mask] -> Where(mask, x, x's first selected row): the unselected places copy a selected
  // row (row 0 when none is selected), so the ops after compute only on selected data.
  void rewrite_selection(const Selection& s) {
    Value* x = s.gather->inputs[0];
    const Shape& xs = *x->type.shape;
    const Shape trailing(xs.begin() + mask_rank(), xs.end());
    const size_t first_new = g_.nodes.size();
    GradBuilder b(g_, s.gather->name + "/in_place");
    Value* flat = b.reshape(mask_, {mask_numel()});
    Value* first =
        b.op("ArgMax", {b.cast(flat, DType::kFloat32)}, {DType::kInt64, Shape{}},
             attrs(ir::Attribute::make_int("axis", 0), ir::Attribute::make_int("keepdims", 0)));
    Shape rows{mask_numel()};
    rows.insert(rows.end(), trailing.begin(), trailing.end());
    Value* row = b.op("Gather", {b.reshape(x, rows), first}, {x->type.dtype, trailing},
                      attrs(ir::Attribute::make_int("axis", 0)));
    Value* in_place = b.op("Where", {mask_for(b, xs.size()), x, row}, x->type);
    Value* out = s.gather->outputs[0];
    ir::replace_by_appended(g_, s.gather, first_new, in_place);
    out->type = x->type;
  }

  // Sum: ReduceSum(Where(mask, v, 0)); mean: that over (true elements x trailing size).
  void rewrite_reduction(Node* t) {
    Value* v = t->inputs[0];
    const DType dtype = v->type.dtype;
    const ir::TensorType scalar{dtype, Shape{}};
    const size_t first_new = g_.nodes.size();
    GradBuilder b(g_, t->name + "/in_place");
    Value* kept =
        b.op("Where", {mask_for(b, v->type.shape->size()), v, b.scalar(0, dtype)}, v->type);
    Value* result =
        b.op("ReduceSum", {kept}, scalar, attrs(ir::Attribute::make_int("keepdims", 0)));
    if (is_op(t, "ReduceMean")) {
      Value* count = b.op("ReduceSum", {b.cast(mask_, dtype)}, scalar,
                          attrs(ir::Attribute::make_int("keepdims", 0)));
      const int64_t trailing = ir::shape_numel(trailing_.at(v));
      if (trailing != 1) count = b.mul(count, b.scalar(static_cast<double>(trailing), dtype));
      result = b.op("Div", {result, count}, scalar);
    }
    const Shape& out = *t->outputs[0]->type.shape;
    if (!out.empty()) result = b.reshape(result, out);
    ir::replace_by_appended(g_, t, first_new, result);
  }

  // The loss over every row, the unselected rows' labels set to its ignore_index.
  void rewrite_loss(Node* t) {
    Value* scores = t->inputs[0];
    Value* labels = t->inputs[1];
    const int64_t classes = scores->type.shape->back();
    const ir::Attribute* ignore = t->attr("ignore_index");
    const int64_t ignored = ignore ? ignore->i : -100;
    const size_t first_new = g_.nodes.size();
    GradBuilder b(g_, t->name + "/in_place");
    Value* kept =
        b.op("Where", {mask_, labels, b.scalar(static_cast<double>(ignored), labels->type.dtype)},
             labels->type);
    std::vector<Value*> inputs = {b.reshape(scores, {mask_numel(), classes}),
                                  b.reshape(kept, {mask_numel()})};
    if (t->inputs.size() > 2 && t->inputs[2]) inputs.push_back(t->inputs[2]);
    // The ops' attributes: reduction (mean or sum here) and ignore_index.
    const ir::Attribute* reduction = t->attr("reduction");
    std::vector<ir::Attribute> attributes;
    attributes.push_back(
        ir::Attribute::make_string("reduction", reduction ? reduction->s : std::string("mean")));
    attributes.push_back(ir::Attribute::make_int("ignore_index", ignored));
    Value* loss = b.op(t->op_type, inputs, t->outputs[0]->type, std::move(attributes));
    ir::replace_by_appended(g_, t, first_new, std::vector<Value*>{loss});
  }

  ir::Graph& g_;
  Value* mask_;
  std::vector<Selection> selections_;
  std::map<const Value*, Shape> trailing_;  // each selected value's dimensions after the count
  std::vector<Node*> elementwise_;
  std::vector<Node*> terminals_;
  std::set<const Node*> classified_;
};

}  // namespace

int compute_boolean_masks_in_place(ir::Model& model) {
  ir::Graph& g = *model.graph;
  const auto has_nonzero = [&g] {
    return std::any_of(g.nodes.begin(), g.nodes.end(),
                       [](const auto& n) { return is_op(n.get(), "NonZero"); });
  };
  if (!has_nonzero()) return 0;
  // `pred[y > 0]` and `y[y > 0]` compute their masks apart: one mask value once merged.
  eliminate_common_subexpressions(model);
  std::map<Value*, std::vector<Selection>> by_mask;
  std::vector<Value*> order;
  for (const auto& n : g.nodes) {
    if (auto s = as_selection(n.get())) {
      if (!by_mask.count(s->mask())) order.push_back(s->mask());
      by_mask[s->mask()].push_back(*s);
    }
  }
  int rewritten = 0;
  for (Value* mask : order) {
    Group group(g, mask);
    for (const Selection& s : by_mask[mask]) group.add(s);
    if (!group.classify()) continue;
    group.rewrite();
    rewritten += static_cast<int>(by_mask[mask].size());
  }
  return rewritten;
}

}  // namespace ampc::passes
