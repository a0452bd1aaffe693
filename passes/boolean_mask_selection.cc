#include "passes/boolean_mask_selection.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/node_match.h"
#include "passes/autodiff/grad_builder.h"
#include "passes/common_subexpression.h"
#include "passes/dead_code_elimination.h"
#include "passes/reduce_axes.h"
#include "passes/selected_row_ops.h"

namespace ampc::passes {
namespace {

using autodiff::attrs;
using autodiff::GradBuilder;
using ir::Node;
using ir::Value;
using Shape = std::vector<int64_t>;

// x[mask]: GatherND(x, Transpose(NonZero(mask), perm [1, 0])), batch_dims 0, with a static bool
// mask whose shape starts x's static shape.
struct Selection {
  Node* gather;
  Node* transpose;
  Node* nonzero;
  Value* mask() const { return nonzero->inputs[0]; }
};

// The NonZero whose positions `indices` lists as rows: Transpose(NonZero(m), perm [1, 0]).
Node* nonzero_rows(const Value* indices) {
  Node* t = indices ? indices->producer : nullptr;
  if (!ir::is_onnx_op(t, "Transpose")) return nullptr;
  const ir::Attribute* perm = t->attr("perm");
  if (!perm || perm->ints != Shape{1, 0}) return nullptr;
  Node* nz = t->inputs[0] ? t->inputs[0]->producer : nullptr;
  return ir::is_onnx_op(nz, "NonZero") ? nz : nullptr;
}

std::optional<Selection> as_selection(Node* gather) {
  if (!ir::is_onnx_op(gather, "GatherND") || gather->inputs.size() < 2) return std::nullopt;
  if (const ir::Attribute* b = gather->attr("batch_dims"); b && b->i != 0) return std::nullopt;
  Value* x = gather->inputs[0];
  Node* nz = nonzero_rows(gather->inputs[1]);
  if (!nz) return std::nullopt;
  Node* t = gather->inputs[1]->producer;
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

// The mask whose true places Transpose(NonZero(m), perm [1, 0]) lists, looking through an
// Expand of the mask to its own shape (torch's index_put broadcasts the mask to x's shape).
Value* listed_mask(const Value* indices) {
  Node* nz = nonzero_rows(indices);
  if (!nz) return nullptr;
  Value* m = nz->inputs[0];
  Node* e = m ? m->producer : nullptr;
  if (ir::is_onnx_op(e, "Expand") && e->inputs[0] && e->inputs[0]->type.is_static() &&
      m->type.is_static() && *m->type.shape == *e->inputs[0]->type.shape)
    return e->inputs[0];
  return m;
}

// The selections by one mask and everything their selected elements reach: elementwise ops
// (their outputs are selected values too) and the terminals (a sum or mean over all, a loss).
class Group {
 public:
  struct MaskedWrite {  // y[mask] = values
    Node* scatter;
    Value* values;
  };

  Group(ir::Graph& g, Value* mask, int64_t opset) : g_(g), mask_(mask), opset_(opset) {}

  bool writes() const { return !writes_.empty(); }

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
      if (!is_full_reduction(*n) && !is_row_loss(*n) && !is_masked_write(*n) &&
          !classify_per_row(*n))
        return false;
    }
    // Every use of a selected value must be one of the nodes classified (not a subgraph's).
    for (const auto& [v, trailing] : trailing_) {
      if (is_graph_output(g_, v)) return false;
      for (const ir::Use& u : v->uses) {
        if (!classified_.count(u.node)) return false;
      }
    }
    return !terminals_.empty() || !writes_.empty();
  }

  void rewrite() {
    for (const Selection& s : selections_) rewrite_selection(s);
    for (Node* n : per_row_) {
      const Value* out = n->outputs[0];
      Shape dense = mask_shape();
      dense.insert(dense.end(), trailing_.at(out).begin(), trailing_.at(out).end());
      selected_rows::adapt(g_, n, mask_rank(), {out->type.dtype, dense}, opset_);
    }
    for (Node* t : terminals_) {
      if (ir::is_onnx_op(t, "ReduceSum") || ir::is_onnx_op(t, "ReduceMean"))
        rewrite_reduction(t);
      else
        rewrite_loss(t);
    }
    for (const MaskedWrite& w : writes_) rewrite_write(w);
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

  // An op that acts on each selected element alone (selected_row_ops.h): its output is
  // selected.
  bool classify_per_row(Node& n) {
    std::vector<const Shape*> trailing;
    for (const Value* in : n.inputs) trailing.push_back(selected(in) ? &trailing_.at(in) : nullptr);
    const std::optional<Shape> out = selected_rows::output_trailing(n, trailing, opset_);
    if (!out) return false;
    trailing_[n.outputs[0]] = *out;
    per_row_.push_back(&n);
    classified_.insert(&n);
    return true;
  }

  // ReduceSum / ReduceMean of one selected float value over all of its axes.
  bool is_full_reduction(Node& n) {
    if (!ir::is_onnx_op(&n, "ReduceSum") && !ir::is_onnx_op(&n, "ReduceMean")) return false;
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
    if (!ir::is_onnx_op(&n, "SoftmaxCrossEntropyLoss") &&
        !ir::is_onnx_op(&n, "NegativeLogLikelihoodLoss"))
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

  // x[mask] = v for a mask of x's shape and v computed from selections by it (torch's
  // index_put): ScatterND(x, Transpose(NonZero(mask)), v), reduction none, v either the
  // selected value itself or Slice(Reshape(v, [-1]), 0, count), torch's broadcast of the
  // values to the count. `n` is the node reading v: the ScatterND or the Reshape.
  bool is_masked_write(Node& n) {
    Node* scatter = &n;
    Value* v = nullptr;
    if (ir::is_onnx_op(&n, "Reshape") && selected(n.inputs[0]) && !selected(n.inputs[1])) {
      const ir::Attribute* allowzero = n.attr("allowzero");
      const ir::Tensor* shape = n.inputs[1] ? n.inputs[1]->initializer.get() : nullptr;
      if ((allowzero && allowzero->i != 0) || !shape || shape->numel() != 1 ||
          ir::int_values(*shape) != std::vector<int64_t>{-1})
        return false;
      Node* slice = only_reader(n.outputs[0]);
      if (!ir::is_onnx_op(slice, "Slice") || slice->inputs[0] != n.outputs[0] ||
          !starts_at_0(*slice))
        return false;
      scatter = only_reader(slice->outputs[0]);
      if (!scatter || scatter->inputs.size() < 3 || scatter->inputs[2] != slice->outputs[0])
        return false;
      v = n.inputs[0];
    } else if (ir::is_onnx_op(&n, "ScatterND") && n.inputs.size() >= 3) {
      v = n.inputs[2];
    }
    if (!ir::is_onnx_op(scatter, "ScatterND") || !v || !selected(v) || !trailing_.at(v).empty())
      return false;
    const Value* x = scatter->inputs[0];
    if (selected(x) || selected(scatter->inputs[1]) || !x->type.is_static() ||
        *x->type.shape != mask_shape() || listed_mask(scatter->inputs[1]) != mask_)
      return false;
    if (const ir::Attribute* r = scatter->attr("reduction"); r && r->s != "none") return false;
    writes_.push_back({scatter, v});
    classified_.insert(&n);
    return true;
  }

  static Node* only_reader(const Value* v) {
    return v && v->uses.size() == 1 ? v->uses[0].node : nullptr;
  }

  // A Slice of axis 0 from 0 (its end is the count, which the values have anyway).
  static bool starts_at_0(const Node& slice) {
    if (slice.inputs.size() < 3 || !slice.inputs[1] || !slice.inputs[1]->initializer) return false;
    if (ir::int_values(*slice.inputs[1]->initializer) != std::vector<int64_t>{0}) return false;
    if (slice.inputs.size() > 3 && slice.inputs[3]) {
      if (!slice.inputs[3]->initializer ||
          ir::int_values(*slice.inputs[3]->initializer) != std::vector<int64_t>{0})
        return false;
    }
    if (slice.inputs.size() > 4 && slice.inputs[4]) {
      if (!slice.inputs[4]->initializer ||
          ir::int_values(*slice.inputs[4]->initializer) != std::vector<int64_t>{1})
        return false;
    }
    return true;
  }

  // x[mask] = v -> Where(mask, v, x) (v computed in place, the mask's shape).
  void rewrite_write(const MaskedWrite& w) {
    Value* x = w.scatter->inputs[0];
    const size_t first_new = g_.nodes.size();
    GradBuilder b(g_, w.scatter->name + "/in_place");
    Value* written = b.op("Where", {mask_, w.values, x}, x->type);
    ir::replace_by_appended(g_, w.scatter, first_new, written);
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
    if (ir::is_onnx_op(t, "ReduceMean")) {
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
  int64_t opset_;
  std::vector<Node*> per_row_;
  std::vector<Node*> terminals_;
  std::vector<MaskedWrite> writes_;
  std::set<const Node*> classified_;
};

}  // namespace

int compute_boolean_masks_in_place(ir::Model& model) {
  ir::Graph& g = *model.graph;
  const auto has_nonzero = [&g] {
    return std::any_of(g.nodes.begin(), g.nodes.end(),
                       [](const auto& n) { return ir::is_onnx_op(n.get(), "NonZero"); });
  };
  if (!has_nonzero()) return 0;
  // `pred[y > 0]` and `y[y > 0]` compute their masks apart: one mask value once merged.
  eliminate_common_subexpressions(model);
  std::map<Value*, std::vector<Selection>> by_mask;
  std::vector<Value*> order;
  int64_t opset = 0;
  for (const auto& o : model.opsets) {
    if (o.domain.empty() || o.domain == "ai.onnx") opset = o.version;
  }
  for (const auto& n : g.nodes) {
    if (auto s = as_selection(n.get())) {
      if (!by_mask.count(s->mask())) order.push_back(s->mask());
      by_mask[s->mask()].push_back(*s);
    }
  }
  int rewritten = 0;
  bool wrote = false;
  for (Value* mask : order) {
    Group group(g, mask, opset);
    for (const Selection& s : by_mask[mask]) group.add(s);
    if (!group.classify()) continue;
    group.rewrite();
    wrote = wrote || group.writes();
    rewritten += static_cast<int>(by_mask[mask].size());
  }
  // What a rewritten masked write leaves (the values' flattening, the count, the write's
  // NonZero) would keep a shape known only at run time in the graph.
  if (wrote) eliminate_dead_code(model, {.keep_initializers = true});
  return rewritten;
}

}  // namespace ampc::passes
