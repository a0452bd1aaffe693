#include "passes/reductions_for_cuda.h"

#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <onnx/defs/schema.h>

#include "passes/autodiff/grad_builder.h"
#include "passes/reduce_axes.h"

namespace ampc::passes {
namespace {

using autodiff::attrs;
using autodiff::GradBuilder;
using ir::Value;
using Shape = std::vector<int64_t>;

int64_t normalized(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

bool is_16_bit(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16;
}

// The types the CUDA backend's reductions take (f64 data is left to the CPU backend).
bool reducible(DType t) {
  return t == DType::kFloat32 || is_16_bit(t);
}

// The integer values of a constant input (int32 or int64), or nothing.
std::optional<std::vector<int64_t>> constant_ints(const Value* v) {
  if (!v || !v->initializer) return std::nullopt;
  return ir::int_values(*v->initializer);
}

// A Reduce node that keeps the reduced dimensions, in the form the model's opset defines (the
// plan embeds this graph as the training step's ONNX): the axes an attribute where the
// operator's schema at that opset has one (ReduceSum before 13, the others before 18), else an
// input.
Value* reduce_keeping(GradBuilder& b, int64_t opset, const std::string& op, Value* x,
                      const std::vector<int64_t>& axes) {
  Shape kept = *x->type.shape;
  for (int64_t a : axes) kept[static_cast<size_t>(a)] = 1;
  const ir::TensorType type{x->type.dtype, kept};
  const auto* schema = onnx::OpSchemaRegistry::Schema(op, static_cast<int>(opset), "");
  if (!schema || schema->attributes().count("axes") == 0)
    return b.op(op, {x, b.ints(axes)}, type, attrs(ir::Attribute::make_int("keepdims", 1)));
  return b.op(
      op, {x}, type,
      attrs(ir::Attribute::make_int("keepdims", 1), ir::Attribute::make_ints("axes", axes)));
}

// A 1-D constant stood along `axis` of a rank-`rank` shape.
Shape along(size_t rank, int64_t axis, int64_t size) {
  Shape s(rank, 1);
  s[static_cast<size_t>(axis)] = size;
  return s;
}

// Positions 0 .. size - 1 as float32, along `axis` of a rank-`rank` shape.
Value* positions_along(GradBuilder& b, size_t rank, int64_t axis, int64_t size) {
  std::vector<double> indices(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) indices[static_cast<size_t>(i)] = static_cast<double>(i);
  return b.reshape(b.floats(indices, DType::kFloat32), along(rank, axis, size));
}

Value* arg_extreme(GradBuilder& b, int64_t opset, const ir::Node& n) {
  Value* x = n.inputs[0];
  if (!reducible(x->type.dtype)) return nullptr;
  const Shape& d = *x->type.shape;
  const ir::Attribute* a = n.attr("axis");
  const int64_t axis = normalized(a ? a->i : 0, d.size());
  const int64_t size = d[static_cast<size_t>(axis)];
  if (size <= 0 || size > (int64_t{1} << 24)) return nullptr;  // float positions stay exact
  const ir::Attribute* l = n.attr("select_last_index");
  const bool last = l && l->i != 0;
  const ir::TensorType flags{DType::kBool, d};
  Value* extreme =
      reduce_keeping(b, opset, n.op_type == "ArgMax" ? "ReduceMax" : "ReduceMin", x, {axis});
  Value* hit = b.op("Or", {b.op("Equal", {x, extreme}, flags), b.op("IsNaN", {x}, flags)}, flags);
  Value* where = b.op("Where",
                      {hit, positions_along(b, d.size(), axis, size),
                       b.scalar(last ? -1.0 : static_cast<double>(size), DType::kFloat32)},
                      {DType::kFloat32, d});
  Value* chosen = reduce_keeping(b, opset, last ? "ReduceMax" : "ReduceMin", where, {axis});
  return b.reshape(b.cast(chosen, DType::kInt64), *n.outputs[0]->type.shape);
}

Value* log_sum_exp(GradBuilder& b, int64_t opset, const ir::Node& n) {
  Value* x = n.inputs[0];
  const DType t = x->type.dtype;
  if (!reducible(t)) return nullptr;
  const auto axes = reduce_axes(n, x->type.shape->size());
  if (!axes) return nullptr;
  Value* w = b.cast(x, is_16_bit(t) ? DType::kFloat32 : t);
  Value* m = reduce_keeping(b, opset, "ReduceMax", w, *axes);
  const ir::TensorType flags{DType::kBool, m->type.shape};
  Value* odd = b.op("Or", {b.op("IsInf", {m}, flags), b.op("IsNaN", {m}, flags)}, flags);
  // All -inf, some +inf or a NaN: the maximum is the result (the sum's NaN there is not read).
  Value* e = b.op("Exp", {b.op("Sub", {w, m}, w->type)}, w->type);
  Value* s = reduce_keeping(b, opset, "ReduceSum", e, *axes);
  Value* sum = b.op("Add", {b.op("Log", {s}, s->type), m}, s->type);
  Value* result = b.op("Where", {odd, m, sum}, m->type);
  return b.reshape(b.cast(result, t), *n.outputs[0]->type.shape);
}

// y moved `by` places along `axis` (towards its end, or with `backwards` towards its start),
// zeros coming in: a Slice of what stays and a Pad.
Value* shifted(GradBuilder& b, Value* y, int64_t axis, int64_t by, bool backwards) {
  const Shape& d = *y->type.shape;
  const auto a = static_cast<size_t>(axis);
  const int64_t size = d[a];
  Shape cut = d;
  cut[a] = size - by;
  Value* kept = b.op(
      "Slice",
      {y, b.ints({backwards ? by : 0}), b.ints({backwards ? size : size - by}), b.ints({axis})},
      {y->type.dtype, cut});
  std::vector<int64_t> pads(2 * d.size(), 0);
  pads[(backwards ? d.size() : 0) + a] = by;
  return b.op("Pad", {kept, b.ints(pads)}, y->type);
}

Value* cum_sum(GradBuilder& b, const ir::Node& n) {
  Value* x = n.inputs[0];
  const DType t = x->type.dtype;
  const auto axis_value = constant_ints(n.inputs[1]);
  if (!axis_value || axis_value->size() != 1 || t == DType::kBool) return nullptr;
  const Shape& d = *x->type.shape;
  const int64_t axis = normalized((*axis_value)[0], d.size());
  const int64_t size = d[static_cast<size_t>(axis)];
  if (size <= 0) return nullptr;
  const ir::Attribute* e = n.attr("exclusive");
  const ir::Attribute* r = n.attr("reverse");
  const bool exclusive = e && e->i != 0, reverse = r && r->i != 0;
  Value* y = b.cast(x, is_16_bit(t) ? DType::kFloat32 : t);
  if (exclusive && size == 1) {  // nothing comes before the only element
    y = b.op("Expand", {b.scalar(0.0, y->type.dtype), b.ints(d)}, y->type);
  } else {
    // After the step of shift s, each element holds the sum of the 2s elements ending at it.
    for (int64_t s = 1; s < size; s *= 2)
      y = b.op("Add", {y, shifted(b, y, axis, s, reverse)}, y->type);
    if (exclusive) y = shifted(b, y, axis, 1, reverse);
  }
  return b.cast(y, t);
}

bool int32_or_64(DType t) {
  return t == DType::kInt64 || t == DType::kInt32;
}

// An integer sum, maximum or minimum (`op`: ReduceSum, ReduceMax, ReduceMin) over `axes`, the
// reduced dimensions kept: each axis halved until one element is left, its first half
// combined with its second (Add, or a Where of a comparison), the last element of an odd
// length carried along by a Concat. Exact, as the CPU op's (integer sums wrap alike).
Value* integer_reduce(GradBuilder& b, const std::string& op, Value* x,
                      const std::vector<int64_t>& axes) {
  const DType t = x->type.dtype;
  auto slice = [&](Value* y, int64_t axis, int64_t from, int64_t to) {
    Shape s = *y->type.shape;
    s[static_cast<size_t>(axis)] = to - from;
    return b.op("Slice", {y, b.ints({from}), b.ints({to}), b.ints({axis})}, {t, s});
  };
  auto combine = [&](Value* a, Value* c) {
    if (op == "ReduceSum") return b.op("Add", {a, c}, a->type);
    Value* first = b.op(op == "ReduceMax" ? "GreaterOrEqual" : "LessOrEqual", {a, c},
                        {DType::kBool, a->type.shape});
    return b.op("Where", {first, a, c}, a->type);
  };
  Value* y = x;
  for (int64_t axis : axes) {
    for (int64_t size = (*y->type.shape)[static_cast<size_t>(axis)]; size > 1;
         size = (size + 1) / 2) {
      const int64_t half = size / 2;
      Value* pairs = combine(slice(y, axis, 0, half), slice(y, axis, half, 2 * half));
      if (size % 2 == 1) {
        Shape s = *pairs->type.shape;
        s[static_cast<size_t>(axis)] = half + 1;
        pairs = b.op("Concat", {pairs, slice(y, axis, 2 * half, size)}, {t, s},
                     attrs(ir::Attribute::make_int("axis", axis)));
      }
      y = pairs;
    }
  }
  return y;
}

// An integer ReduceSum / ReduceMax / ReduceMin (attention_mask.sum(-1)), by integer_reduce.
Value* integer_reduction(GradBuilder& b, const ir::Node& n) {
  Value* x = n.inputs[0];
  if (!int32_or_64(x->type.dtype)) return nullptr;
  const auto axes = reduce_axes(n, x->type.shape->size());
  if (!axes) return nullptr;
  return b.reshape(integer_reduce(b, n.op_type, x, *axes), *n.outputs[0]->type.shape);
}

// TopK's k up to which it is rewritten: k rounds of a few reductions over the axis each.
constexpr int64_t kMaxTopK = 32;

// Where `a` holds, ANDed with `also` (when there is one).
Value* both(GradBuilder& b, Value* a, Value* also) {
  return also ? b.op("And", {a, also}, a->type) : a;
}

// The positions round `taken` leaves that hold the extreme of what is left: for the largest, the
// maximum (a NaN, when one is left: NaN comes first); for the smallest, the minimum of the
// numbers left, or the NaNs once no number is.
Value* extreme_positions(GradBuilder& b, int64_t opset, Value* x, int64_t axis, bool largest,
                         Value* available) {
  const ir::TensorType flags{DType::kBool, x->type.shape};
  const DType t = x->type.dtype;
  const double inf = std::numeric_limits<double>::infinity();
  Value* nan = b.op("IsNaN", {x}, flags);
  if (largest) {
    Value* rest = available ? b.op("Where", {available, x, b.scalar(-inf, t)}, x->type) : x;
    Value* m = reduce_keeping(b, opset, "ReduceMax", rest, {axis});
    Value* m_nan = b.op("IsNaN", {m}, {DType::kBool, m->type.shape});
    return b.op("Or", {b.op("Equal", {x, m}, flags), b.op("And", {nan, m_nan}, flags)}, flags);
  }
  Value* number = both(b, b.op("Not", {nan}, flags), available);
  Value* m = reduce_keeping(b, opset, "ReduceMin",
                            b.op("Where", {number, x, b.scalar(inf, t)}, x->type), {axis});
  const ir::TensorType kept{DType::kBool, m->type.shape};
  Value* counted = reduce_keeping(
      b, opset, "ReduceMax",
      b.op("Where", {number, b.scalar(1.0, DType::kFloat32), b.scalar(0.0, DType::kFloat32)},
           {DType::kFloat32, x->type.shape}),
      {axis});
  Value* any_number = b.op("Greater", {counted, b.scalar(0.0, DType::kFloat32)}, kept);
  Value* least = b.op("And", {number, b.op("Equal", {x, m}, flags)}, flags);
  Value* nan_left = b.op("And", {b.op("Not", {any_number}, kept), nan}, flags);
  return b.op("Or", {b.op("And", {any_number, least}, flags), nan_left}, flags);
}

// The largest number of comparisons (elements times the axis's length) up to which TopK is
// rewritten by ranks (top_k_by_ranks): flags and float ranks of that many elements, 64 MiB.
constexpr int64_t kMaxRankComparisons = int64_t{1} << 24;

// x with a dimension of one inserted at `at`.
Value* unsqueezed(GradBuilder& b, Value* x, size_t at) {
  Shape s = *x->type.shape;
  s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), 1);
  return b.reshape(x, s);
}

// Each element's rank along `axis` in TopK's order, float32 [.., i, 1, ..] (a dimension of one
// after the axis): the number of elements that come before it, counted over all pairs [.., i,
// j, ..]. For the largest, those greater, then NaNs before numbers; for the smallest those
// less, NaNs after numbers; ties and NaNs among themselves by lower index.
Value* ranks(GradBuilder& b, int64_t opset, Value* x, int64_t axis, bool largest) {
  const auto a = static_cast<size_t>(axis);
  Value* xi = unsqueezed(b, x, a + 1);
  Value* xj = unsqueezed(b, x, a);
  Shape pairs = *x->type.shape;
  pairs.insert(pairs.begin() + static_cast<std::ptrdiff_t>(a) + 1, pairs[a]);
  const ir::TensorType flags{DType::kBool, pairs};
  Shape square(pairs.size(), 1);
  square[a] = square[a + 1] = pairs[a];
  Value* j_first = b.op("Less",
                        {positions_along(b, pairs.size(), axis + 1, pairs[a]),
                         positions_along(b, pairs.size(), axis, pairs[a])},
                        {DType::kBool, square});
  Value* before = b.op(largest ? "Greater" : "Less", {xj, xi}, flags);
  Value* tie = b.op("Equal", {xj, xi}, flags);
  if (!int32_or_64(x->type.dtype)) {
    // NaN, equal to nothing: the largest, the smallest after every number; NaNs tie.
    const ir::TensorType xi_flags{DType::kBool, xi->type.shape};
    const ir::TensorType xj_flags{DType::kBool, xj->type.shape};
    Value* nan_i = b.op("IsNaN", {xi}, xi_flags);
    Value* nan_j = b.op("IsNaN", {xj}, xj_flags);
    Value* nan_first = largest ? b.op("And", {nan_j, b.op("Not", {nan_i}, xi_flags)}, flags)
                               : b.op("And", {nan_i, b.op("Not", {nan_j}, xj_flags)}, flags);
    before = b.op("Or", {before, nan_first}, flags);
    tie = b.op("Or", {tie, b.op("And", {nan_i, nan_j}, flags)}, flags);
  }
  before = b.op("Or", {before, b.op("And", {tie, j_first}, flags)}, flags);
  return reduce_keeping(
      b, opset, "ReduceSum",
      b.op("Where", {before, b.scalar(1.0, DType::kFloat32), b.scalar(0.0, DType::kFloat32)},
           {DType::kFloat32, pairs}),
      {axis + 1});
}

// TopK (sorted, a constant k up to the whole axis) of integers, and of floats with a k above
// kMaxTopK (torch.sort, torch.argsort; pack_padded_sequence's sort of the lengths): output slot
// r holds the element of rank r (ranks above), read back by a reduction over the elements with
// only that one left: the CPU op's order, so the same values and indices bit for bit. Integer
// values by an exact sum of one non-zero term (integer_reduce).
std::vector<Value*> top_k_by_ranks(GradBuilder& b, int64_t opset, Value* x, int64_t axis, int64_t k,
                                   bool largest) {
  const DType t = x->type.dtype;
  const auto a = static_cast<size_t>(axis);
  Value* rank = ranks(b, opset, x, axis, largest);  // [.., i, 1, ..]
  // Slots [.., i, r, ..]: element i is the r-th.
  std::vector<double> slots(static_cast<size_t>(k));
  for (int64_t r = 0; r < k; ++r) slots[static_cast<size_t>(r)] = static_cast<double>(r);
  Shape slot_shape(rank->type.shape->size(), 1);
  slot_shape[a + 1] = k;
  Shape chosen_shape = *rank->type.shape;
  chosen_shape[a + 1] = k;
  Value* chosen = b.op("Equal", {rank, b.reshape(b.floats(slots, DType::kFloat32), slot_shape)},
                       {DType::kBool, chosen_shape});
  Value* positions = positions_along(b, chosen_shape.size(), axis, chosen_shape[a]);
  Value* index = reduce_keeping(b, opset, "ReduceSum",
                                b.op("Where", {chosen, positions, b.scalar(0.0, DType::kFloat32)},
                                     {DType::kFloat32, chosen_shape}),
                                {axis});
  Value* xi = unsqueezed(b, x, a + 1);
  Value* value = nullptr;
  if (int32_or_64(t)) {
    value = integer_reduce(
        b, "ReduceSum", b.op("Where", {chosen, xi, b.scalar(0.0, t)}, {t, chosen_shape}), {axis});
  } else {
    // The element itself (its sign of zero, its NaN): the only one the Where leaves above -inf.
    value = reduce_keeping(
        b, opset, "ReduceMax",
        b.op("Where", {chosen, xi, b.scalar(-std::numeric_limits<double>::infinity(), t)},
             {t, chosen_shape}),
        {axis});
  }
  Shape out = *x->type.shape;
  out[a] = k;
  return {b.reshape(value, out), b.reshape(b.cast(index, DType::kInt64), out)};
}

// Float TopK, sorted, with a constant k of at most kMaxTopK: k rounds, each choosing the first
// available position that holds the extreme of what is left (extreme_positions) and marking it
// taken; the values and indices of the rounds concatenated along the axis. The CPU op's order:
// ties by lower index, NaN the largest.
std::vector<Value*> top_k_by_rounds(GradBuilder& b, int64_t opset, Value* x, int64_t axis,
                                    int64_t k, bool largest) {
  const DType t = x->type.dtype;
  const Shape& d = *x->type.shape;
  const int64_t size = d[static_cast<size_t>(axis)];
  Value* positions = positions_along(b, d.size(), axis, size);
  const ir::TensorType flags{DType::kBool, d};
  const double inf = std::numeric_limits<double>::infinity();
  Value* taken = nullptr;
  std::vector<Value*> values, chosen;
  for (int64_t round = 0; round < k; ++round) {
    Value* available = taken ? b.op("Not", {taken}, flags) : nullptr;
    Value* hit = both(b, extreme_positions(b, opset, x, axis, largest, available), available);
    Value* first = reduce_keeping(
        b, opset, "ReduceMin",
        b.op("Where", {hit, positions, b.scalar(static_cast<double>(size), DType::kFloat32)},
             {DType::kFloat32, d}),
        {axis});
    Value* picked = b.op("Equal", {positions, first}, flags);
    // The element itself (its sign of zero, its NaN): the only one the Where leaves above -inf.
    values.push_back(reduce_keeping(
        b, opset, "ReduceMax", b.op("Where", {picked, x, b.scalar(-inf, t)}, x->type), {axis}));
    chosen.push_back(b.cast(first, DType::kInt64));
    taken = taken ? b.op("Or", {taken, picked}, flags) : picked;
  }
  Shape out = d;
  out[static_cast<size_t>(axis)] = k;
  auto joined = [&](const std::vector<Value*>& parts, DType type) {
    if (parts.size() == 1) return parts[0];
    return b.op("Concat", parts, {type, out}, attrs(ir::Attribute::make_int("axis", axis)));
  };
  return {joined(values, t), joined(chosen, DType::kInt64)};
}

// TopK, sorted, with a constant k: floats by rounds up to kMaxTopK, integers and larger k by
// ranks while the pairs stay within kMaxRankComparisons. TopK unsorted (ONNX leaves the order
// open; the CPU op orders by index) is left as it is.
std::vector<Value*> top_k(GradBuilder& b, int64_t opset, const ir::Node& n) {
  Value* x = n.inputs[0];
  const DType t = x->type.dtype;
  if (!reducible(t) && !int32_or_64(t)) return {};
  std::optional<std::vector<int64_t>> k_value;
  if (opset >= 10) {
    k_value = n.inputs.size() > 1 ? constant_ints(n.inputs[1]) : std::nullopt;
  } else if (const ir::Attribute* ka = n.attr("k")) {
    k_value = std::vector<int64_t>{ka->i};
  }
  if (!k_value || k_value->size() != 1) return {};
  const int64_t k = (*k_value)[0];
  const ir::Attribute* sorted = n.attr("sorted");
  const ir::Attribute* l = n.attr("largest");
  const ir::Attribute* a = n.attr("axis");
  const bool largest = !l || l->i != 0;
  const Shape& d = *x->type.shape;
  const int64_t axis = normalized(a ? a->i : -1, d.size());
  const int64_t size = d[static_cast<size_t>(axis)];
  if ((sorted && sorted->i == 0 && k > 1) || k < 1 || k > size || size > (int64_t{1} << 24))
    return {};
  if (!int32_or_64(t) && k <= kMaxTopK) return top_k_by_rounds(b, opset, x, axis, k, largest);
  int64_t comparisons = size;
  for (int64_t e : d) comparisons *= e;
  if (comparisons > kMaxRankComparisons) return {};
  return top_k_by_ranks(b, opset, x, axis, k, largest);
}

}  // namespace

int reductions_for_cuda(ir::Model& model) {
  ir::Graph& g = *model.graph;
  const int64_t opset = model.opset_version("").value_or(0);
  static const std::set<std::string> kOps = {"ArgMax", "ArgMin",    "ReduceLogSumExp", "CumSum",
                                             "TopK",   "ReduceSum", "ReduceMax",       "ReduceMin"};
  std::vector<ir::Node*> todo;
  for (const auto& n : g.nodes) {
    if (n->domain.empty() && kOps.count(n->op_type) > 0 && ir::has_static_types(*n))
      todo.push_back(n.get());
  }
  int rewritten = 0;
  for (ir::Node* n : todo) {
    GradBuilder b(g, (n->name.empty() ? n->op_type : n->name) + "/cuda");
    const size_t first_new = g.nodes.size();
    // A result that is not a new node's (CumSum over an axis of one: x itself) is copied by
    // an Identity, so that the replacement never takes over another node's output.
    auto own = [&](Value* v) {
      for (size_t i = first_new; i < g.nodes.size(); ++i) {
        if (g.nodes[i].get() == v->producer) return v;
      }
      return b.op("Identity", {v}, v->type);
    };
    if (n->op_type == "TopK") {
      std::vector<Value*> results = top_k(b, opset, *n);
      if (results.empty()) continue;
      for (Value*& r : results) r = own(r);
      ir::replace_by_appended(g, n, first_new, results);
      ++rewritten;
      continue;
    }
    Value* result = nullptr;
    if (n->op_type == "CumSum") {
      result = cum_sum(b, *n);
    } else if (n->op_type == "ReduceSum" || n->op_type == "ReduceMax" ||
               n->op_type == "ReduceMin") {
      result = integer_reduction(b, *n);
    } else if (n->op_type == "ReduceLogSumExp") {
      result = log_sum_exp(b, opset, *n);
    } else {
      result = arg_extreme(b, opset, *n);
    }
    if (!result) continue;
    ir::replace_by_appended(g, n, first_new, own(result));
    ++rewritten;
  }
  return rewritten;
}

}  // namespace ampc::passes
