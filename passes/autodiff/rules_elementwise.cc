// Gradients of elementwise ops (numpy broadcasting: each input gradient is summed back to
// the input's shape).
#include "passes/autodiff/gradient_registry.h"

namespace ampc::passes::autodiff {
namespace {

using ir::Value;

// dL/dx for y = f(x) with dy/dx given as a value of y's shape.
void unary(GradContext& c, Value* local) {
  c.set_input_grad(0, c.b.op("Mul", {c.output_grad(0), local}, c.input(0)->type));
}

Value* same(GradContext& c, const std::string& op, std::vector<Value*> in) {
  return c.b.op(op, std::move(in), c.output(0)->type);
}

void add_sub(GradContext& c, bool subtract) {
  Value* dy = c.output_grad(0);
  if (c.needs(0)) c.set_input_grad(0, c.b.reduce_to(dy, c.input(0)->type));
  if (c.needs(1)) {
    Value* d = subtract ? same(c, "Neg", {dy}) : dy;
    c.set_input_grad(1, c.b.reduce_to(d, c.input(1)->type));
  }
}

void mul(GradContext& c) {
  Value* dy = c.output_grad(0);
  if (c.needs(0))
    c.set_input_grad(0, c.b.reduce_to(same(c, "Mul", {dy, c.input(1)}), c.input(0)->type));
  if (c.needs(1))
    c.set_input_grad(1, c.b.reduce_to(same(c, "Mul", {dy, c.input(0)}), c.input(1)->type));
}

void div(GradContext& c) {
  Value* dy = c.output_grad(0);
  Value* da = same(c, "Div", {dy, c.input(1)});  // dy / b
  if (c.needs(0)) c.set_input_grad(0, c.b.reduce_to(da, c.input(0)->type));
  if (c.needs(1)) {  // -dy * a / b^2 = -(dy / b) * y
    Value* db = same(c, "Neg", {same(c, "Mul", {da, c.output(0)})});
    c.set_input_grad(1, c.b.reduce_to(db, c.input(1)->type));
  }
}

// y = x^p with a constant p: dy/dx = p * x^(p-1). A trainable exponent is not supported.
void pow(GradContext& c) {
  if (c.needs(1)) c.fail("the exponent of Pow must be constant");
  const Value* p = c.input(1);
  if (!p->initializer || p->initializer->numel() != 1)
    c.fail("the exponent of Pow must be a constant scalar");
  const DType t = c.input(0)->type.dtype;
  Value* pm1 = c.b.op("Sub", {c.input(1), c.b.scalar(1.0, p->type.dtype)}, p->type);
  Value* xp = c.b.op("Pow", {c.input(0), pm1}, c.input(0)->type);
  Value* pt = p->type.dtype == t
                  ? c.input(1)
                  : c.b.op("Cast", {c.input(1)}, {t, p->type.shape},
                           attrs(ir::Attribute::make_int("to", static_cast<int64_t>(t))));
  Value* local = c.b.op("Mul", {xp, pt}, c.input(0)->type);
  c.set_input_grad(0, c.b.reduce_to(same(c, "Mul", {c.output_grad(0), local}), c.input(0)->type));
}

void register_unary(GradientRegistry& r) {
  r.add("Identity", [](GradContext& c) { c.set_input_grad(0, c.output_grad(0)); });
  r.add("Neg", [](GradContext& c) { c.set_input_grad(0, same(c, "Neg", {c.output_grad(0)})); });
  r.add("Exp", [](GradContext& c) { unary(c, c.output(0)); });
  r.add("Log", [](GradContext& c) {
    c.set_input_grad(0, same(c, "Div", {c.output_grad(0), c.input(0)}));
  });
  r.add("Sqrt", [](GradContext& c) {  // dy / (2 y)
    Value* two_y = same(c, "Add", {c.output(0), c.output(0)});
    c.set_input_grad(0, same(c, "Div", {c.output_grad(0), two_y}));
  });
  r.add("Relu", [](GradContext& c) {  // dy where x > 0
    const auto t = c.input(0)->type;
    Value* positive =
        c.b.op("Greater", {c.input(0), c.b.scalar(0.0, t.dtype)}, {DType::kBool, t.shape});
    c.set_input_grad(0, c.b.op("Where", {positive, c.output_grad(0), c.b.scalar(0.0, t.dtype)}, t));
  });
  r.add("Sigmoid", [](GradContext& c) {  // y (1 - y)
    Value* one_minus = same(c, "Sub", {c.b.scalar(1.0, c.output(0)->type.dtype), c.output(0)});
    unary(c, same(c, "Mul", {c.output(0), one_minus}));
  });
  r.add("Tanh", [](GradContext& c) {  // 1 - y^2
    Value* y2 = same(c, "Mul", {c.output(0), c.output(0)});
    unary(c, same(c, "Sub", {c.b.scalar(1.0, c.output(0)->type.dtype), y2}));
  });
  r.add("Erf", [](GradContext& c) {  // 2/sqrt(pi) exp(-x^2)
    const DType t = c.input(0)->type.dtype;
    Value* x2 = same(c, "Mul", {c.input(0), c.input(0)});
    Value* e = same(c, "Exp", {same(c, "Neg", {x2})});
    unary(c, same(c, "Mul", {e, c.b.scalar(1.1283791670955126, t)}));
  });
}

}  // namespace

void register_elementwise_gradients(GradientRegistry& r) {
  r.add("Add", [](GradContext& c) { add_sub(c, false); });
  r.add("Sub", [](GradContext& c) { add_sub(c, true); });
  r.add("Mul", mul);
  r.add("Div", div);
  r.add("Pow", pow);
  register_unary(r);
}

}  // namespace ampc::passes::autodiff
