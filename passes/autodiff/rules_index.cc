// Gradients of ops that select, combine or repeat parts of tensors: Gather, GatherElements,
// GatherND, TopK, ScatterElements, ScatterND, Trilu, Concat, Split, Slice, Where, Expand, Tile,
// Pad. Selected elements send their gradient back to where they came from (adding up where an
// element was read several times); padding gets none.
#include <algorithm>
#include <limits>

#include "passes/autodiff/gradient_registry.h"
#include "passes/autodiff/index_offsets.h"

namespace ampc::passes::autodiff {
namespace {

using ir::Value;
using Shape = std::vector<int64_t>;

const Shape& shape_of(const Value* v) {
  return *v->type.shape;
}

int64_t norm_axis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

ir::Attribute axis_attr(int64_t axis) {
  return ir::Attribute::make_int("axis", axis);
}

// data [.., K, ..] gathered along `axis` by indices I: dy [P, I, Q] is transposed to [I, P, Q]
// and scatter-added (ScatterND, reduction add) into zeros [K, P, Q], so repeats add up.
void gather(GradContext& c) {
  const Shape& d = shape_of(c.input(0));
  const auto axis = static_cast<size_t>(norm_axis(c.attr_int("axis", 0), d.size()));
  const int64_t k = d[axis], p = product(d, 0, axis), q = product(d, axis + 1, d.size());
  const int64_t n = ir::shape_numel(shape_of(c.input(1)));
  const DType t = c.input(0)->type.dtype;

  Value* idx = wrapped_indices(c.b, c.b.reshape(c.input(1), {n, 1}), k);

  Value* dy = c.b.reshape(c.output_grad(0), {p, n, q});
  if (p > 1) {
    dy = c.b.op("Transpose", {dy}, {t, Shape{n, p, q}},
                attrs(ir::Attribute::make_ints("perm", {1, 0, 2})));
  } else {
    dy = c.b.reshape(dy, {n, p, q});
  }
  Value* dx = c.b.op("ScatterND", {c.b.filled(0.0, {t, Shape{k, p, q}}), idx, dy},
                     {t, Shape{k, p, q}}, attrs(ir::Attribute::make_string("reduction", "add")));
  if (p > 1) {
    dx = c.b.op("Transpose", {dx}, {t, Shape{p, k, q}},
                attrs(ir::Attribute::make_ints("perm", {1, 0, 2})));
  }
  c.set_input_grad(0, c.b.reshape(dx, d));
}

// GatherND: dy, one row per index tuple, scatter-added (ScatterND, reduction add) into zeros
// of data viewed as [rows, slice] at the rows the tuples name (nd_rows), so repeats add up; a
// tuple out of range addresses past the end, which the ScatterND refuses as the op does.
void gather_nd(GradContext& c) {
  const Shape& d = shape_of(c.input(0));
  const DType t = c.input(0)->type.dtype;
  const auto nd = nd_rows(c.b, d, c.b.cast(c.input(1), DType::kInt64),
                          static_cast<size_t>(c.attr_int("batch_dims", 0)));
  if (!nd) c.fail("index tuples of length 0 have no gradient");
  const int64_t n = ir::shape_numel(shape_of(nd->rows));
  Value* dx = c.b.op("ScatterND",
                     {c.b.filled(0.0, {t, Shape{nd->count, nd->slice}}),
                      c.b.reshape(nd->rows, {n, 1}), c.b.reshape(c.output_grad(0), {n, nd->slice})},
                     {t, Shape{nd->count, nd->slice}},
                     attrs(ir::Attribute::make_string("reduction", "add")));
  c.set_input_grad(0, c.b.reshape(dx, d));
}

// element_offsets (index_offsets.h) as [numel(idx), 1], ScatterND's index layout.
Value* element_offsets(GradContext& c, const Shape& d, int64_t axis, Value* idx) {
  return c.b.reshape(autodiff::element_offsets(c.b, d, axis, idx),
                     {ir::shape_numel(shape_of(idx)), 1});
}

std::string reduction_of(GradContext& c) {
  const ir::Attribute* a = c.node().attr("reduction");
  const std::string reduction = a ? a->s : "none";
  if (reduction != "none" && reduction != "add")
    c.fail("reduction '" + reduction + "' has no gradient (none and add have)");
  return reduction;
}

// Data of shape `d` as rows of `row` elements ([numel] when a row is one element), and `n`
// rows picked from it.
Shape row_view(const Shape& d, int64_t row) {
  const int64_t numel = ir::shape_numel(d);
  return row == 1 ? Shape{numel} : Shape{numel / row, row};
}
Shape picked_rows(int64_t n, int64_t row) {
  return row == 1 ? Shape{n} : Shape{n, row};
}

// `values` written into `base` viewed as rows (zeros when null) at the row offsets [n, 1]:
// added when `add`, else replacing. The result has shape `d`.
Value* scatter_rows(GradContext& c, Value* base, const Shape& d, int64_t row, Value* offsets,
                    Value* values, bool add) {
  const DType t = values->type.dtype;
  const Shape rows = row_view(d, row);
  Value* into = base ? c.b.reshape(base, rows) : c.b.filled(0.0, {t, rows});
  Value* out = c.b.op(
      "ScatterND", {into, offsets, c.b.reshape(values, picked_rows(shape_of(offsets)[0], row))},
      {t, rows}, attrs(ir::Attribute::make_string("reduction", add ? "add" : "none")));
  return c.b.reshape(out, d);
}

// The rows of `x` (shape `d`, viewed as rows) at the offsets [n, 1], as shape `s`.
Value* gather_rows(GradContext& c, Value* x, const Shape& d, int64_t row, Value* offsets,
                   const Shape& s) {
  const int64_t n = shape_of(offsets)[0];
  Value* out = c.b.op("Gather", {c.b.reshape(x, row_view(d, row)), c.b.reshape(offsets, {n})},
                      {x->type.dtype, picked_rows(n, row)});
  return c.b.reshape(out, s);
}

// The gradient of data of shape `d` read element by element along `axis` at `idx` (as
// GatherElements and TopK's values read): every element of dy is added into the element it
// came from (ScatterND into zeros, so repeated indices add up).
Value* scatter_add_elements(GradContext& c, const Shape& d, int64_t axis, Value* idx, Value* dy) {
  return scatter_rows(c, nullptr, d, 1, element_offsets(c, d, axis, idx), dy, true);
}

// The gradients of a scatter of `updates` into data (shape `d`, as rows of `row` elements) at
// row `offsets`: data's is dy where nothing was written (reduction none replaces written
// elements, so they take zeros) or all of dy (add); the updates' is dy read back at them.
void scatter_gradients(GradContext& c, const Shape& d, int64_t row, Value* offsets) {
  const std::string reduction = reduction_of(c);
  Value* dy = c.output_grad(0);
  if (!dy) return;
  if (c.needs(0)) {
    c.set_input_grad(
        0, reduction == "add"
               ? dy
               : scatter_rows(c, dy, d, row, offsets, c.b.filled(0.0, c.input(2)->type), false));
  }
  if (c.needs(2)) c.set_input_grad(2, gather_rows(c, dy, d, row, offsets, shape_of(c.input(2))));
}

// ScatterElements (torch's scatter / scatter_add along an axis).
void scatter_elements(GradContext& c) {
  const Shape& d = shape_of(c.input(0));
  const int64_t axis = norm_axis(c.attr_int("axis", 0), d.size());
  scatter_gradients(c, d, 1, element_offsets(c, d, axis, c.input(1)));
}

// ScatterND (slice and index assignment: x[i] = v, x[:, j] = v, index_put): indices [.., k]
// name slices of data's first k axes. A slice is a row of data viewed as [slices, slice
// size]; its offset is the sum of its k indices (negative ones wrapped) times data's strides
// over those axes in units of the slice.
void scatter_nd(GradContext& c) {
  const Shape& d = shape_of(c.input(0));
  const Shape& is = shape_of(c.input(1));
  const auto k = static_cast<size_t>(is.back());
  const int64_t n = product(is, 0, is.size() - 1);
  const ir::TensorType offsets{DType::kInt64, Shape{n, 1}};
  Value* idx = c.b.reshape(c.input(1), {n, static_cast<int64_t>(k)});
  Value* flat = nullptr;
  int64_t stride = 1;
  for (size_t j = k; j-- > 0;) {
    const auto at = static_cast<int64_t>(j);
    Value* column = c.b.op("Slice", {idx, c.b.ints({at}), c.b.ints({at + 1}), c.b.ints({1})},
                           {idx->type.dtype, Shape{n, 1}});
    Value* term = c.b.op("Mul",
                         {wrapped_indices(c.b, column, d[j]),
                          c.b.scalar(static_cast<double>(stride), DType::kInt64)},
                         offsets);
    flat = flat ? c.b.op("Add", {flat, term}, offsets) : term;
    stride *= d[j];
  }
  scatter_gradients(c, d, product(d, k, d.size()), flat);
}

// GatherElements (torch.gather): y[.., i, ..] = x[.., idx[.., i, ..], ..] along `axis`.
void gather_elements(GradContext& c) {
  const Shape& d = shape_of(c.input(0));
  const int64_t axis = norm_axis(c.attr_int("axis", 0), d.size());
  if (Value* dy = c.output_grad(0))
    c.set_input_grad(0, scatter_add_elements(c, d, axis, c.input(1), dy));
}

// TopK: the values are x read at the indices output along `axis`; the indices carry no
// gradient.
void top_k(GradContext& c) {
  const Shape& d = shape_of(c.input(0));
  const int64_t axis = norm_axis(c.attr_int("axis", -1), d.size());
  if (Value* dy = c.output_grad(0))
    c.set_input_grad(0, scatter_add_elements(c, d, axis, c.output(1), dy));
}

// Trilu (torch.tril / triu): the gradient keeps the same triangle.
void trilu(GradContext& c) {
  if (c.needs(1)) c.fail("the diagonal offset k has no gradient");
  std::vector<Value*> in = {c.output_grad(0)};
  if (c.input(1)) in.push_back(c.input(1));
  c.set_input_grad(0, c.b.op("Trilu", in, c.input(0)->type,
                             attrs(ir::Attribute::make_int("upper", c.attr_int("upper", 1)))));
}

// Part [start, start + size) of `grad` along `axis`.
Value* slice_axis(GradContext& c, Value* grad, int64_t axis, int64_t start, int64_t size) {
  Shape s = shape_of(grad);
  s[static_cast<size_t>(axis)] = size;
  return c.b.op("Slice", {grad, c.b.ints({start}), c.b.ints({start + size}), c.b.ints({axis})},
                {grad->type.dtype, s});
}

void concat(GradContext& c) {
  const Shape& out = shape_of(c.output(0));
  const int64_t axis = norm_axis(c.attr_int("axis", 0), out.size());
  int64_t start = 0;
  for (size_t i = 0; i < c.node().inputs.size(); ++i) {
    const int64_t size = shape_of(c.input(i))[static_cast<size_t>(axis)];
    if (c.needs(i)) c.set_input_grad(i, slice_axis(c, c.output_grad(0), axis, start, size));
    start += size;
  }
}

// The output gradients side by side, zeros for outputs that get none.
void split(GradContext& c) {
  const int64_t axis = norm_axis(c.attr_int("axis", 0), shape_of(c.input(0)).size());
  std::vector<Value*> parts;
  for (size_t i = 0; i < c.node().outputs.size(); ++i) {
    Value* g = c.output_grad(i);
    parts.push_back(g ? g : c.b.filled(0.0, c.output(i)->type));
  }
  c.set_input_grad(0, c.b.op("Concat", parts, c.input(0)->type, attrs(axis_attr(axis))));
}

// Pad of axis a of g by `before` and `after` zeros.
Value* pad_axis(GradContext& c, Value* g, size_t a, int64_t before, int64_t after) {
  if (before == 0 && after == 0) return g;
  Shape s = shape_of(g);
  const size_t rank = s.size();
  Shape pads(2 * rank, 0);
  pads[a] = before;
  pads[a + rank] = after;
  s[a] += before + after;
  return c.b.op("Pad", {g, c.b.ints(pads)}, {g->type.dtype, s});
}

// Elements [start, start + size) of axis a of g, with `step` (-1: reversed from start).
Value* slice_of(GradContext& c, Value* g, size_t a, int64_t start, int64_t end, int64_t step,
                int64_t size) {
  Shape s = shape_of(g);
  s[a] = size;
  return c.b.op("Slice",
                {g, c.b.ints({start}), c.b.ints({end}), c.b.ints({static_cast<int64_t>(a)}),
                 c.b.ints({step})},
                {g->type.dtype, s});
}

// Axis a of g (count elements, read from positions first + j * step of an axis of length dim)
// put back in place: zeros at the positions not read.
Value* unslice_axis(GradContext& c, Value* g, size_t a, int64_t dim, int64_t first, int64_t step,
                    int64_t count) {
  if (count == 0) {  // nothing read along this axis
    Shape s = shape_of(g);
    s[a] = dim;
    return c.b.filled(0.0, {g->type.dtype, s});
  }
  if (step < 0) {  // reversed, it reads first + (count - 1) * step upwards by -step
    g = slice_of(c, g, a, -1, std::numeric_limits<int64_t>::min(), -1, count);
    first += (count - 1) * step;
    step = -step;
  }
  if (step > 1) {
    Shape s = shape_of(g), with_axis;
    for (size_t k = 0; k < s.size(); ++k) {
      with_axis.push_back(s[k]);
      if (k == a) with_axis.push_back(1);  // each element its own row of `step`
    }
    g = pad_axis(c, c.b.reshape(g, with_axis), a + 1, 0, step - 1);
    s[a] = count * step;
    g = c.b.reshape(g, s);
    count *= step;
    if (count > dim - first) {  // the zeros after the last element that reach past the end
      g = slice_of(c, g, a, 0, dim - first, 1, dim - first);
      count = dim - first;
    }
  }
  return pad_axis(c, g, a, first, dim - first - count);
}

// Slice: the effective start, step and count of each axis (ONNX clamping rules); the
// gradient is padded back with zeros (unit steps), or spaced out first (other steps).
void slice(GradContext& c) {
  const Shape& in = shape_of(c.input(0));
  const auto rank = in.size();
  const auto starts = c.const_ints(1), ends = c.const_ints(2);
  std::vector<int64_t> axes = c.const_ints(3), steps = c.const_ints(4);
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  Shape first(rank, 0), step(rank, 1), count = in;
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto a = static_cast<size_t>(norm_axis(axes[i], rank));
    const int64_t dim = in[a], st = steps[i];
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    const int64_t n = st > 0 ? (e - s + st - 1) / st : (s - e - st - 1) / -st;
    first[a] = s;
    step[a] = st;
    count[a] = std::max<int64_t>(n, 0);
  }
  Value* dy = c.output_grad(0);
  bool unit = true;
  for (int64_t st : step) unit &= st == 1;
  if (unit) {
    Shape pads(2 * rank);
    for (size_t a = 0; a < rank; ++a) {
      pads[a] = first[a];
      pads[a + rank] = in[a] - first[a] - count[a];
    }
    c.set_input_grad(0, c.b.op("Pad", {dy, c.b.ints(pads)}, c.input(0)->type));
    return;
  }
  // Strided: each axis in turn takes dy from its count back to the input's length, with data
  // movement only (Slice, Reshape, Pad: ops every backend runs; the positions are distinct,
  // so nothing adds). A negative step is a positive one over dy reversed; a step s > 1 spaces
  // dy out with s - 1 zeros after each element (an axis of size 1 padded to s, merged).
  Value* g = dy;
  for (size_t a = 0; a < rank; ++a) g = unslice_axis(c, g, a, in[a], first[a], step[a], count[a]);
  c.set_input_grad(0, g);
}

void where(GradContext& c) {
  Value* dy = c.output_grad(0);
  Value* zero = c.b.scalar(0.0, dy->type.dtype);
  if (c.needs(1)) {
    Value* g = c.b.op("Where", {c.input(0), dy, zero}, dy->type);
    c.set_input_grad(1, c.b.reduce_to(g, c.input(1)->type));
  }
  if (c.needs(2)) {
    Value* g = c.b.op("Where", {c.input(0), zero, dy}, dy->type);
    c.set_input_grad(2, c.b.reduce_to(g, c.input(2)->type));
  }
}

// Tile: dy viewed as [r0, d0, r1, d1, ...] and summed over the repeats.
void tile(GradContext& c) {
  const Shape& in = shape_of(c.input(0));
  const auto repeats = c.const_ints(1);
  Shape split_shape, axes;
  for (size_t a = 0; a < in.size(); ++a) {
    axes.push_back(static_cast<int64_t>(split_shape.size()));
    split_shape.push_back(repeats[a]);
    split_shape.push_back(in[a]);
  }
  Value* dy = c.b.reshape(c.output_grad(0), split_shape);
  c.set_input_grad(0, c.b.op("ReduceSum", {dy, c.b.ints(axes)}, c.input(0)->type,
                             attrs(ir::Attribute::make_int("keepdims", 0))));
}

}  // namespace

void register_index_gradients(GradientRegistry& r) {
  r.add("Gather", gather);
  r.add("GatherElements", gather_elements);
  r.add("GatherND", gather_nd);
  r.add("TopK", top_k);
  r.add("ScatterElements", scatter_elements);
  r.add("ScatterND", scatter_nd);
  r.add("Trilu", trilu);
  r.add("Concat", concat);
  r.add("Split", split);
  r.add("Slice", slice);
  r.add("Where", where);
  r.add("Expand", [](GradContext& c) {
    c.set_input_grad(0, c.b.reduce_to(c.output_grad(0), c.input(0)->type));
  });
  r.add("Tile", tile);
}

}  // namespace ampc::passes::autodiff
