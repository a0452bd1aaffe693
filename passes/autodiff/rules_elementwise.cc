// Gradients of elementwise ops (numpy broadcasting: each input gradient is summed back to
// the input's shape).
#include "ops/ampc_forms.h"
#include "ops/schemas/ampc_schemas.h"
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

// y = Mod(a, b) = a - b q, q the quotient a / b rounded toward zero (fmod 1: torch.fmod) or
// down (fmod 0): dy/da = 1 and dy/db = -q, as PyTorch's gradients of fmod and remainder.
void mod(GradContext& c) {
  Value* dy = c.output_grad(0);
  if (c.needs(0)) c.set_input_grad(0, c.b.reduce_to(dy, c.input(0)->type));
  if (!c.needs(1)) return;
  Value* t = same(c, "Div", {c.input(0), c.input(1)});
  Value* q = same(c, "Floor", {t});
  if (c.attr_int("fmod", 0) != 0) {
    const ir::TensorType flags{DType::kBool, t->type.shape};
    Value* negative = c.b.op("Less", {t, c.b.scalar(0.0, t->type.dtype)}, flags);
    q = same(c, "Where", {negative, same(c, "Ceil", {t}), q});
  }
  c.set_input_grad(1, c.b.reduce_to(same(c, "Neg", {same(c, "Mul", {dy, q})}), c.input(1)->type));
}

// y = x^p with a constant p: dy/dx = p * x^(p-1). A trainable exponent is not supported.
// Whether Pow's base is a sum of squares raised to a power in (0, 1): torch 1.13's export of
// a 2-norm (F.pairwise_distance: Pow(ReduceSum(Pow(d, 2)), 1 / (2 + eps))). PyTorch's norm
// has the gradient 0 at a zero norm; the ops' own rules give inf there, and inf x 0 = NaN.
bool exported_norm(const GradContext& c) {
  const auto exponent = ir::float_scalar(*c.input(1)->initializer);
  const ir::Node* sum = c.input(0)->producer;
  if (!exponent || !(*exponent > 0 && *exponent < 1) || !sum || !sum->domain.empty()) return false;
  if (sum->op_type == "ReduceSumSquare") return true;
  const ir::Node* square =
      sum->op_type == "ReduceSum" && sum->inputs[0] ? sum->inputs[0]->producer : nullptr;
  if (!square || !square->domain.empty()) return false;
  if (square->op_type == "Mul") return square->inputs[0] == square->inputs[1];
  const ir::Value* two = square->op_type == "Pow" ? square->inputs[1] : nullptr;
  return two && two->initializer && ir::float_scalar(*two->initializer) == 2.0;
}

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
  if (exported_norm(c)) {  // 0 where the norm is 0, as PyTorch's norm backward
    const ir::TensorType x = c.input(0)->type;
    Value* zero = c.b.scalar(0.0, x.dtype);
    Value* at_zero = c.b.op("Equal", {c.input(0), zero}, {DType::kBool, x.shape});
    local = c.b.op("Where", {at_zero, zero, local}, x);
  }
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
  // dy where y > 0 (the same mask as x > 0, NaN included), from the output as PyTorch's
  // threshold_backward does: the input need not outlive the forward, and a GEMM's Relu folds
  // into the GEMM's epilogue in a training plan too (the GEMM's result then has one reader).
  r.add("Relu", [](GradContext& c) {
    const auto t = c.output(0)->type;
    Value* positive =
        c.b.op("Greater", {c.output(0), c.b.scalar(0.0, t.dtype)}, {DType::kBool, t.shape});
    c.set_input_grad(0, c.b.op("Where", {positive, c.output_grad(0), c.b.scalar(0.0, t.dtype)}, t));
  });
  r.add("HardSwish", [](GradContext& c) {  // 0 below -3, 1 above 3, x/3 + 1/2 between
    Value* x = c.input(0);
    const auto t = x->type;
    const ir::TensorType mask{DType::kBool, t.shape};
    Value* slope = same(
        c, "Add", {same(c, "Mul", {x, c.b.scalar(1.0 / 3.0, t.dtype)}), c.b.scalar(0.5, t.dtype)});
    Value* above = c.b.op("Greater", {x, c.b.scalar(3.0, t.dtype)}, mask);
    Value* below = c.b.op("Less", {x, c.b.scalar(-3.0, t.dtype)}, mask);
    Value* d = c.b.op("Where", {above, c.b.scalar(1.0, t.dtype), slope}, t);
    unary(c, c.b.op("Where", {below, c.b.scalar(0.0, t.dtype), d}, t));
  });
  r.add("HardSigmoid", [](GradContext& c) {  // alpha where 0 < y < 1
    Value* y = c.output(0);
    const auto t = y->type;
    const ir::TensorType mask{DType::kBool, t.shape};
    Value* inside = c.b.op("And",
                           {c.b.op("Greater", {y, c.b.scalar(0.0, t.dtype)}, mask),
                            c.b.op("Less", {y, c.b.scalar(1.0, t.dtype)}, mask)},
                           mask);
    const double alpha = c.attr_float("alpha", 0.2f);
    unary(c, c.b.op("Where", {inside, c.b.scalar(alpha, t.dtype), c.b.scalar(0.0, t.dtype)}, t));
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

// Unary math whose derivative is built from other ops (PyTorch's choices at the points where
// the op is not differentiable: Abs' slope at 0 is 0, as sign(0)).
void register_unary_math(GradientRegistry& r) {
  r.add("Abs", [](GradContext& c) { unary(c, same(c, "Sign", {c.input(0)})); });  // sign(x)
  r.add("Sin", [](GradContext& c) { unary(c, same(c, "Cos", {c.input(0)})); });   // cos(x)
  r.add("Cos", [](GradContext& c) {                                               // -sin(x)
    unary(c, same(c, "Neg", {same(c, "Sin", {c.input(0)})}));
  });
  r.add("Reciprocal", [](GradContext& c) {  // -y^2
    Value* y = c.output(0);
    unary(c, same(c, "Neg", {same(c, "Mul", {y, y})}));
  });
  r.add("Softplus", [](GradContext& c) {  // sigmoid(x)
    unary(c, same(c, "Sigmoid", {c.input(0)}));
  });
  r.add("Softsign", [](GradContext& c) {  // 1 / (1 + |x|)^2
    const DType t = c.input(0)->type.dtype;
    Value* d = same(c, "Add", {c.b.scalar(1.0, t), same(c, "Abs", {c.input(0)})});
    c.set_input_grad(0, same(c, "Div", {c.output_grad(0), same(c, "Mul", {d, d})}));
  });
}

// The trigonometric and hyperbolic functions and their inverses (torch.tan, asin, atan, ...;
// torchvision's complete_box_iou_loss takes atan of the boxes' aspect ratios), each
// derivative from the input x or the output y: where the derivative is infinite (asin at
// +-1) it is inf or NaN, as PyTorch's.
void register_trigonometric(GradientRegistry& r) {
  // 1 + s x^2 and its square root, s = +-1 (the derivatives' common parts)
  auto one_plus = [](GradContext& c, double s) {
    const DType t = c.input(0)->type.dtype;
    Value* x2 = same(c, "Mul", {c.input(0), c.input(0)});
    return same(c, s > 0 ? "Add" : "Sub", {c.b.scalar(1.0, t), x2});
  };
  auto divided = [](GradContext& c, Value* d) {  // dy / d
    c.set_input_grad(0, same(c, "Div", {c.output_grad(0), d}));
  };
  r.add("Tan", [](GradContext& c) {  // 1 + y^2
    const DType t = c.output(0)->type.dtype;
    unary(c, same(c, "Add", {c.b.scalar(1.0, t), same(c, "Mul", {c.output(0), c.output(0)})}));
  });
  r.add("Sinh", [](GradContext& c) { unary(c, same(c, "Cosh", {c.input(0)})); });  // cosh(x)
  r.add("Cosh", [](GradContext& c) { unary(c, same(c, "Sinh", {c.input(0)})); });  // sinh(x)
  r.add("Atan", [=](GradContext& c) { divided(c, one_plus(c, 1)); });              // 1 / (1 + x^2)
  r.add("Atanh", [=](GradContext& c) { divided(c, one_plus(c, -1)); });            // 1 / (1 - x^2)
  r.add("Asin", [=](GradContext& c) {  // 1 / sqrt(1 - x^2)
    divided(c, same(c, "Sqrt", {one_plus(c, -1)}));
  });
  r.add("Acos", [=](GradContext& c) {  // -1 / sqrt(1 - x^2)
    divided(c, same(c, "Neg", {same(c, "Sqrt", {one_plus(c, -1)})}));
  });
  r.add("Asinh", [=](GradContext& c) {  // 1 / sqrt(x^2 + 1)
    divided(c, same(c, "Sqrt", {one_plus(c, 1)}));
  });
  r.add("Acosh", [](GradContext& c) {  // 1 / sqrt(x^2 - 1)
    const DType t = c.input(0)->type.dtype;
    Value* x2 = same(c, "Mul", {c.input(0), c.input(0)});
    Value* root = same(c, "Sqrt", {same(c, "Sub", {x2, c.b.scalar(1.0, t)})});
    c.set_input_grad(0, same(c, "Div", {c.output_grad(0), root}));
  });
}

// Clip: dy where min < x < max (min and max are constant bounds).
void clip(GradContext& c) {
  if (c.needs(1) || c.needs(2)) c.fail("the bounds of Clip must be constant");
  const auto t = c.input(0)->type;
  const ir::TensorType mask_type{DType::kBool, t.shape};
  Value* inside = nullptr;
  auto both = [&](Value* m) { return inside ? c.b.op("And", {inside, m}, mask_type) : m; };
  if (c.input(1)) inside = both(c.b.op("Greater", {c.input(0), c.input(1)}, mask_type));
  if (c.input(2)) inside = both(c.b.op("Less", {c.input(0), c.input(2)}, mask_type));
  if (!inside) return c.set_input_grad(0, c.output_grad(0));
  c.set_input_grad(0, c.b.op("Where", {inside, c.output_grad(0), c.b.scalar(0.0, t.dtype)}, t));
}

// The single value of a constant input, or `fallback` when the input is omitted.
double const_scalar(GradContext& c, size_t i, double fallback) {
  const Value* v = c.input(i);
  if (!v) return fallback;
  if (!v->initializer || v->initializer->numel() != 1)
    c.fail("input " + std::to_string(i) + " must be a constant scalar for training");
  const ir::Tensor& t = *v->initializer;
  if (t.dtype == DType::kBool) return t.bytes[0] != 0;
  const auto value = ir::float_scalar(t);
  if (!value) c.fail("input " + std::to_string(i) + " has an unsupported type for training");
  return *value;
}

// Dropout: the identity in inference mode; in training mode dy * mask / (1 - ratio).
void dropout(GradContext& c) {
  const bool training = const_scalar(c, 2, 0.0) != 0.0;
  const double ratio = const_scalar(c, 1, 0.5);
  if (!training || ratio == 0.0) return c.set_input_grad(0, c.output_grad(0));
  if (!c.output(1)) c.fail("training-mode Dropout needs its mask output for the gradient");
  const auto t = c.input(0)->type;
  Value* mask = c.b.op("Cast", {c.output(1)}, t,
                       attrs(ir::Attribute::make_int("to", static_cast<int64_t>(t.dtype))));
  Value* scaled = c.b.mul(mask, c.b.scalar(1.0 / (1.0 - ratio), t.dtype));
  unary(c, scaled);
}

// x > 0, elementwise.
Value* positive(GradContext& c) {
  const auto t = c.input(0)->type;
  return c.b.op("Greater", {c.input(0), c.b.scalar(0.0, t.dtype)}, {DType::kBool, t.shape});
}

void register_activations(GradientRegistry& r) {
  // As PyTorch: the slope at x = 0 is that of the negative side.
  r.add("LeakyRelu", [](GradContext& c) {  // dy where x > 0, alpha dy elsewhere
    const auto t = c.input(0)->type;
    Value* scaled = c.b.mul(c.output_grad(0), c.b.scalar(c.attr_float("alpha", 0.01f), t.dtype));
    c.set_input_grad(0, c.b.op("Where", {positive(c), c.output_grad(0), scaled}, t));
  });
  r.add("Elu", [](GradContext& c) {  // dy where x > 0, dy (y + alpha) elsewhere
    const auto t = c.input(0)->type;
    Value* y_alpha =
        c.b.op("Add", {c.output(0), c.b.scalar(c.attr_float("alpha", 1.0f), t.dtype)}, t);
    Value* local = c.b.op("Where", {positive(c), c.b.scalar(1.0, t.dtype), y_alpha}, t);
    unary(c, local);
  });
  // Celu: x > 0 ? x : alpha (exp(x / alpha) - 1), whose slope exp(x / alpha) is y / alpha + 1.
  r.add("Celu", [](GradContext& c) {  // dy where x > 0, dy (y / alpha + 1) elsewhere
    const auto t = c.input(0)->type;
    const double alpha = c.attr_float("alpha", 1.0f);
    Value* slope = c.b.op(
        "Add",
        {c.b.op("Div", {c.output(0), c.b.scalar(alpha, t.dtype)}, t), c.b.scalar(1.0, t.dtype)}, t);
    unary(c, c.b.op("Where", {positive(c), c.b.scalar(1.0, t.dtype), slope}, t));
  });
  r.add("ThresholdedRelu", [](GradContext& c) {  // dy where x > alpha, 0 elsewhere
    const auto t = c.input(0)->type;
    Value* above = c.b.op("Greater", {c.input(0), c.b.scalar(c.attr_float("alpha", 1.0f), t.dtype)},
                          {DType::kBool, t.shape});
    c.set_input_grad(0, c.b.op("Where", {above, c.output_grad(0), c.b.scalar(0.0, t.dtype)}, t));
  });
  r.add("Selu", [](GradContext& c) {  // gamma where x > 0, y + gamma alpha elsewhere
    const DType t = c.input(0)->type.dtype;
    const double alpha = c.attr_float("alpha", 1.67326319217681884765625f);
    const double gamma = c.attr_float("gamma", 1.05070102214813232421875f);
    Value* below = same(c, "Add", {c.output(0), c.b.scalar(gamma * alpha, t)});
    unary(c, c.b.op("Where", {positive(c), c.b.scalar(gamma, t), below}, c.input(0)->type));
  });
  // PRelu: y = x where x > 0, slope * x elsewhere (slope broadcast to x, a parameter).
  r.add("PRelu", [](GradContext& c) {
    const auto t = c.input(0)->type;
    Value* dy = c.output_grad(0);
    Value* zero = c.b.scalar(0.0, t.dtype);
    if (c.needs(0)) {
      Value* scaled = c.b.op("Mul", {dy, c.input(1)}, t);
      c.set_input_grad(0, c.b.op("Where", {positive(c), dy, scaled}, t));
    }
    if (c.needs(1)) {
      Value* dslope = c.b.op("Where", {positive(c), zero, c.b.op("Mul", {dy, c.input(0)}, t)}, t);
      c.set_input_grad(1, c.b.reduce_to(dslope, c.input(1)->type));
    }
  });
  r.add("Clip", clip);
  r.add("Cast", [](GradContext& c) {  // the gradient cast back to the input's type
    const auto t = c.input(0)->type;
    c.set_input_grad(0,
                     c.b.op("Cast", {c.output_grad(0)}, t,
                            attrs(ir::Attribute::make_int("to", static_cast<int64_t>(t.dtype)))));
  });
  r.add("Dropout", dropout);
}

// Sum and Mean of any number of broadcast inputs: dy (over the count) summed back to each.
void sum_mean(GradContext& c, bool mean) {
  const size_t n = c.node().inputs.size();
  Value* dy = c.output_grad(0);
  if (mean) dy = same(c, "Div", {dy, c.b.scalar(static_cast<double>(n), dy->type.dtype)});
  for (size_t i = 0; i < n; ++i) {
    if (c.needs(i)) c.set_input_grad(i, c.b.reduce_to(dy, c.input(i)->type));
  }
}

// Max and Min of broadcast inputs: dy to the inputs equal to the result, shared evenly where
// several are (PyTorch's maximum / minimum give half to each of two tied inputs).
void max_min(GradContext& c) {
  const size_t n = c.node().inputs.size();
  const auto& t = c.output(0)->type;
  std::vector<Value*> hits;
  Value* count = nullptr;
  for (size_t i = 0; i < n; ++i) {
    Value* eq = c.b.op("Equal", {c.input(i), c.output(0)}, {DType::kBool, t.shape});
    hits.push_back(c.b.op("Cast", {eq}, t,
                          attrs(ir::Attribute::make_int("to", static_cast<int64_t>(t.dtype)))));
    count = count ? same(c, "Add", {count, hits.back()}) : hits.back();
  }
  Value* share = same(c, "Div", {c.output_grad(0), count});
  for (size_t i = 0; i < n; ++i) {
    if (c.needs(i))
      c.set_input_grad(i, c.b.reduce_to(same(c, "Mul", {share, hits[i]}), c.input(i)->type));
  }
}

}  // namespace

void register_elementwise_gradients(GradientRegistry& r) {
  r.add("Sum", [](GradContext& c) { sum_mean(c, false); });
  r.add("Mean", [](GradContext& c) { sum_mean(c, true); });
  r.add("Max", max_min);
  r.add("Min", max_min);
  r.add("Add", [](GradContext& c) { add_sub(c, false); });
  r.add("Sub", [](GradContext& c) { add_sub(c, true); });
  r.add("Mul", mul);
  r.add("Div", div);
  r.add("Mod", mod);
  r.add("Pow", pow);
  register_unary(r);
  register_unary_math(r);
  register_trigonometric(r);
  register_activations(r);
  // The activations' ampc forms (ops/ampc_forms.h) differentiate as the ONNX ops.
  for (std::string_view op : ops::ampc_activation_forms())
    r.add(ops::OpKey(ops::kAmpcDomain, op), *r.find(ops::OpKey("", op)));
}

}  // namespace ampc::passes::autodiff
