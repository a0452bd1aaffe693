// The gradient of Pad in its three modes (pads >= 0). Constant: the middle part of dy, and to
// a trainable constant value the sum over the padding. Edge (nn.ReplicationPad) and reflect
// (nn.ReflectionPad, the padding of CycleGAN-style generators): per padded axis, the middle
// part plus what the padding copied from the input, added back where it came from. Padding
// along different axes commutes in these modes, so the axes are undone one at a time.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "passes/autodiff/gradient_registry.h"

namespace ampc::passes::autodiff {
namespace {

using ir::Value;
using Shape = std::vector<int64_t>;

// g's elements [from, to) along `axis`.
Value* slice_axis(GradContext& c, Value* g, int64_t axis, int64_t from, int64_t to) {
  Shape s = *g->type.shape;
  s[static_cast<size_t>(axis)] = to - from;
  return c.b.op("Slice", {g, c.b.ints({from}), c.b.ints({to}), c.b.ints({axis})},
                {g->type.dtype, s});
}

// g (of size k along `axis`) placed at [before, before + k) of a run of `size` (zeros around).
Value* place(GradContext& c, Value* g, int64_t axis, int64_t before, int64_t size) {
  const size_t rank = g->type.shape->size();
  const int64_t k = (*g->type.shape)[static_cast<size_t>(axis)];
  std::vector<int64_t> pads(2 * rank, 0);
  pads[static_cast<size_t>(axis)] = before;
  pads[rank + static_cast<size_t>(axis)] = size - before - k;
  Shape s = *g->type.shape;
  s[static_cast<size_t>(axis)] = size;
  return c.b.op("Pad", {g, c.b.ints(pads)}, {g->type.dtype, s});
}

// g in reverse order along `axis`.
Value* reversed(GradContext& c, Value* g, int64_t axis) {
  const int64_t k = (*g->type.shape)[static_cast<size_t>(axis)];
  std::vector<int64_t> order(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) order[static_cast<size_t>(i)] = k - 1 - i;
  return c.b.op("Gather", {g, c.b.ints(order)}, g->type,
                attrs(ir::Attribute::make_int("axis", axis)));
}

// `g` summed along `axis`, which it keeps with size 1.
Value* summed(GradContext& c, Value* g, int64_t axis) {
  Shape s = *g->type.shape;
  s[static_cast<size_t>(axis)] = 1;
  return c.b.op("ReduceSum", {g, c.b.ints({axis})}, {g->type.dtype, s});
}

// The gradient of one axis's edge or reflect padding: g has size before + n + after along the
// axis, the result n. Edge: the padding's sums go to the first and the last element. Reflect:
// out[i] = x[before - i] for i < before and out[before + n + k] = x[n - 2 - k], so the head of g
// reversed goes to x[1 .. before] and the tail reversed to x[n - 1 - after .. n - 2].
Value* unpad_axis(GradContext& c, Value* g, int64_t axis, int64_t n, int64_t before, int64_t after,
                  bool reflect) {
  Value* sum = slice_axis(c, g, axis, before, before + n);
  auto add = [&](Value* part) { sum = c.b.op("Add", {sum, part}, sum->type); };
  if (before > 0) {
    Value* head = slice_axis(c, g, axis, 0, before);
    add(reflect ? place(c, reversed(c, head, axis), axis, 1, n)
                : place(c, summed(c, head, axis), axis, 0, n));
  }
  if (after > 0) {
    Value* tail = slice_axis(c, g, axis, before + n, before + n + after);
    add(reflect ? place(c, reversed(c, tail, axis), axis, n - 1 - after, n)
                : place(c, summed(c, tail, axis), axis, n - 1, n));
  }
  return sum;
}

void pad(GradContext& c) {
  const ir::Attribute* m = c.node().attr("mode");
  const std::string mode = m ? m->s : "constant";
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    c.fail("Pad mode '" + mode + "' is not differentiable");
  const Shape& in = *c.input(0)->type.shape;
  const size_t rank = in.size();
  const std::vector<int64_t> pads = c.const_ints(1);
  std::vector<int64_t> axes = c.const_ints(3);
  if (axes.empty())
    for (size_t a = 0; a < rank; ++a) axes.push_back(static_cast<int64_t>(a));
  for (int64_t& a : axes) a = a < 0 ? a + static_cast<int64_t>(rank) : a;
  const size_t count = axes.size();
  for (size_t i = 0; i < count; ++i) {
    if (pads[i] < 0 || pads[i + count] < 0) c.fail("negative pads are not differentiable");
  }
  Value* dy = c.output_grad(0);
  if (mode != "constant") {
    Value* g = dy;
    for (size_t i = 0; i < count; ++i) {
      const int64_t n = in[static_cast<size_t>(axes[i])];
      if (mode == "reflect" && (pads[i] >= n || pads[i + count] >= n))
        c.fail("reflect padding of " + std::to_string(std::max(pads[i], pads[i + count])) +
               " on an axis of " + std::to_string(n) + " is not differentiable");
      g = unpad_axis(c, g, axes[i], n, pads[i], pads[i + count], mode == "reflect");
    }
    if (c.needs(0)) c.set_input_grad(0, g);
    return;
  }
  Shape starts, ends;
  for (size_t i = 0; i < count; ++i) {
    starts.push_back(pads[i]);
    ends.push_back(pads[i] + in[static_cast<size_t>(axes[i])]);
  }
  Value* inner =
      c.b.op("Slice", {dy, c.b.ints(starts), c.b.ints(ends), c.b.ints(axes)}, c.input(0)->type);
  if (c.needs(0)) c.set_input_grad(0, inner);
  if (c.needs(2)) {
    const ir::TensorType scalar{dy->type.dtype, Shape{}};
    auto total = [&](Value* v) {
      return c.b.op("ReduceSum", {v}, scalar, attrs(ir::Attribute::make_int("keepdims", 0)));
    };
    Value* g = c.b.op("Sub", {total(dy), total(inner)}, scalar);
    c.set_input_grad(2, c.b.reshape(g, *c.input(2)->type.shape));
  }
}

}  // namespace

void register_pad_gradients(GradientRegistry& r) {
  r.add("Pad", pad);
}

}  // namespace ampc::passes::autodiff
