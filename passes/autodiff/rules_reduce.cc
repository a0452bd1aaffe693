// Gradients of the Reduce* ops (ReduceProd included): the output gradient spread back over the
// reduced axes (divided by their size for the mean), times the derivative of the reduction
// for the others; and of
// CumSum (the cumulative sum of the gradient in the other direction).
#include "passes/autodiff/gradient_registry.h"

#include <cstring>

namespace ampc::passes::autodiff {
namespace {

using ir::Value;

// Reduced axes (attribute before opset 18 for most reductions, input for ReduceSum 13+).
std::vector<int64_t> reduced_axes(GradContext& c, int64_t rank) {
  std::vector<int64_t> axes;
  if (const auto* a = c.node().attr("axes")) {
    axes = a->ints;
  } else if (c.input(1)) {
    const Value* v = c.input(1);
    if (!v->initializer) c.fail("reduction axes must be constant for training");
    axes.resize(static_cast<size_t>(v->initializer->numel()));
    std::memcpy(axes.data(), v->initializer->bytes.data(), axes.size() * 8);
  }
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) == 0) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  return axes;
}

void reduce(GradContext& c, bool mean) {
  const auto& in_type = c.input(0)->type;
  const auto& in_shape = *in_type.shape;
  const auto rank = static_cast<int64_t>(in_shape.size());
  const auto axes = reduced_axes(c, rank);
  std::vector<int64_t> kept = in_shape;
  int64_t count = 1;
  for (int64_t a : axes) {
    count *= in_shape[static_cast<size_t>(a)];
    kept[static_cast<size_t>(a)] = 1;
  }
  Value* dy = c.b.reshape(c.output_grad(0), kept);
  if (mean)
    dy = c.b.op("Div", {dy, c.b.scalar(static_cast<double>(count), in_type.dtype)}, dy->type);
  c.set_input_grad(0, c.b.op("Expand", {dy, c.b.ints(in_shape)}, in_type));
}

// A reduction's axes and its output's shape with them kept (size 1), in which the output and
// its gradient broadcast against the input.
struct Kept {
  std::vector<int64_t> axes, shape;
};
Kept kept_of(GradContext& c) {
  Kept k{reduced_axes(c, static_cast<int64_t>(c.input(0)->type.shape->size())),
         *c.input(0)->type.shape};
  for (int64_t a : k.axes) k.shape[static_cast<size_t>(a)] = 1;
  return k;
}
Value* kept_dy(GradContext& c, const Kept& k) {
  return c.b.reshape(c.output_grad(0), k.shape);
}
Value* kept_y(GradContext& c, const Kept& k) {
  return c.b.reshape(c.output(0), k.shape);
}

// dx = dy * local, local of x's shape.
void spread(GradContext& c, Value* dy_kept, Value* local) {
  c.set_input_grad(0, c.b.op("Mul", {local, dy_kept}, c.input(0)->type));
}

void register_reduce_derivatives(GradientRegistry& r) {
  r.add("ReduceSumSquare", [](GradContext& c) {  // 2 x
    Value* x = c.input(0);
    spread(c, kept_dy(c, kept_of(c)), c.b.op("Add", {x, x}, x->type));
  });
  r.add("ReduceL1", [](GradContext& c) {  // sign(x)
    spread(c, kept_dy(c, kept_of(c)), c.b.op("Sign", {c.input(0)}, c.input(0)->type));
  });
  r.add("ReduceL2", [](GradContext& c) {  // x / y; 0 where y = 0 (then x = 0), as PyTorch
    Value* x = c.input(0);
    const Kept k = kept_of(c);
    Value* y = kept_y(c, k);
    Value* dy = kept_dy(c, k);
    const DType t = x->type.dtype;
    Value* zero = c.b.op("Equal", {y, c.b.scalar(0.0, t)}, {DType::kBool, y->type.shape});
    Value* safe = c.b.op("Where", {zero, c.b.scalar(1.0, t), y}, y->type);
    spread(c, c.b.op("Div", {dy, safe}, dy->type), x);
  });
  r.add("ReduceLogSumExp", [](GradContext& c) {  // exp(x - y): the softmax over the axes
    Value* x = c.input(0);
    const Kept k = kept_of(c);
    spread(c, kept_dy(c, k), c.b.op("Exp", {c.b.op("Sub", {x, kept_y(c, k)}, x->type)}, x->type));
  });
  // Prod as PyTorch differentiates it: y / x when no reduced element is zero; with one zero,
  // that element gets the product of the others and the rest nothing; with two, none does.
  r.add("ReduceProd", [](GradContext& c) {
    Value* x = c.input(0);
    const Kept k = kept_of(c);
    const DType t = x->type.dtype;
    const ir::TensorType flags{DType::kBool, x->type.shape};
    const ir::TensorType kept_flags{DType::kBool, k.shape};
    Value* zero = c.b.op("Equal", {x, c.b.scalar(0.0, t)}, flags);
    Value* nonzero = c.b.op("Where", {zero, c.b.scalar(1.0, t), x}, x->type);
    // The product of the non-zero elements, in the forward's form (axes input from opset 18,
    // else the attribute).
    const bool axes_attr = c.input(1) == nullptr;
    std::vector<ir::Attribute> a = attrs(ir::Attribute::make_int("keepdims", 1));
    if (axes_attr) a.push_back(ir::Attribute::make_ints("axes", k.axes));
    Value* others = c.b.op(
        "ReduceProd",
        axes_attr ? std::vector<Value*>{nonzero} : std::vector<Value*>{nonzero, c.b.ints(k.axes)},
        {t, k.shape}, std::move(a));
    Value* zeros = c.b.op("ReduceSum",
                          {c.b.op("Cast", {zero}, x->type,
                                  attrs(ir::Attribute::make_int("to", static_cast<int64_t>(t)))),
                           c.b.ints(k.axes)},
                          {t, k.shape}, attrs(ir::Attribute::make_int("keepdims", 1)));
    Value* none = c.b.op("Equal", {zeros, c.b.scalar(0.0, t)}, kept_flags);
    Value* one = c.b.op("Equal", {zeros, c.b.scalar(1.0, t)}, kept_flags);
    Value* lone_zero = c.b.op("And", {one, zero}, flags);
    Value* at_zero = c.b.op("Where", {lone_zero, others, c.b.scalar(0.0, t)}, x->type);
    Value* local =
        c.b.op("Where", {none, c.b.op("Div", {others, nonzero}, x->type), at_zero}, x->type);
    spread(c, kept_dy(c, k), local);
  });
  // Max and Min: the gradient shared evenly by the elements equal to the result (PyTorch's
  // amax / amin).
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    r.add(op, [](GradContext& c) {
      Value* x = c.input(0);
      const Kept k = kept_of(c);
      Value* dy = kept_dy(c, k);
      const DType t = x->type.dtype;
      Value* hit =
          c.b.op("Cast", {c.b.op("Equal", {x, kept_y(c, k)}, {DType::kBool, x->type.shape})},
                 x->type, attrs(ir::Attribute::make_int("to", static_cast<int64_t>(t))));
      Value* count = c.b.op("ReduceSum", {hit, c.b.ints(k.axes)}, dy->type,
                            attrs(ir::Attribute::make_int("keepdims", 1)));
      spread(c, c.b.op("Div", {dy, count}, dy->type), hit);
    });
  }
}

// CumSum along a constant axis: dx = the cumulative sum of dy in the other direction, as
// exclusive as the forward.
void cumsum(GradContext& c) {
  if (c.needs(1)) c.fail("the axis of CumSum has no gradient");
  std::vector<ir::Attribute> a =
      attrs(ir::Attribute::make_int("exclusive", c.attr_int("exclusive", 0)),
            ir::Attribute::make_int("reverse", c.attr_int("reverse", 0) ? 0 : 1));
  c.set_input_grad(
      0, c.b.op("CumSum", {c.output_grad(0), c.input(1)}, c.input(0)->type, std::move(a)));
}

}  // namespace

void register_reduce_gradients(GradientRegistry& r) {
  r.add("ReduceSum", [](GradContext& c) { reduce(c, false); });
  r.add("ReduceMean", [](GradContext& c) { reduce(c, true); });
  register_reduce_derivatives(r);
  r.add("CumSum", cumsum);
}

}  // namespace ampc::passes::autodiff
