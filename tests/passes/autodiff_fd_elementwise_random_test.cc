// Elementwise gradient rules (rules_elementwise.cc, and Where from rules_index.cc) against
// finite differences in fp64 on random shapes and attributes from a seeded generator:
// binary ops with numpy broadcasting on either side (scalars included), unary ops and
// activations, with inputs kept away from the points where an op is not differentiable.
#include <gtest/gtest.h>

#include "tests/passes/fd_check.h"

namespace ampc {
namespace {

using namespace ampc::fd;  // NOLINT: the test speaks the harness vocabulary

using ir::Attribute;
using passes::autodiff::attrs;
using passes::autodiff::GradBuilder;
using P = const std::vector<ir::Value*>&;

TEST(AutodiffFdElementwiseRandom, BinaryBroadcast) {
  Random rnd(1);
  for (const std::string op : {"Add", "Sub", "Mul", "Div"}) {
    for (int k = 0; k < 8; ++k) {
      const Shape out = rnd.shape(rnd.uniform(0, 3), 1, 3);
      const auto [a, b] = rnd.broadcast_pair(out);
      Case c{op + "_" + str(a) + "_" + str(b), {a, b}, out, [op, out](GradBuilder& g, P p) {
               return g.op(op, {p[0], p[1]}, f64(out));
             }};
      if (op == "Div") {  // a divisor away from 0
        c.kinks = {0.0};
        c.gap = 0.3;
      }
      check(c);
    }
  }
}

// Mod (torch.fmod: fmod 1, quotient toward zero; remainder's form: fmod 0, quotient down):
// 1 for the dividend, minus the quotient for the divisor, both signs of each; the divisor kept
// away from 0 (the seeded draws lie nowhere near a jump, where a / b is whole).
TEST(AutodiffFdElementwiseRandom, Mod) {
  Random rnd(11);
  for (int64_t fmod : {1, 0}) {
    for (int k = 0; k < 6; ++k) {
      const Shape out = rnd.shape(rnd.uniform(0, 3), 1, 3);
      const auto [a, b] = rnd.broadcast_pair(out);
      Case c{"Mod" + std::to_string(fmod) + "_" + str(a) + "_" + str(b),
             {a, b},
             out,
             [fmod, out](GradBuilder& g, P p) {
               return g.op("Mod", {p[0], p[1]}, f64(out), attrs(Attribute::make_int("fmod", fmod)));
             }};
      c.kinks = {0.0};
      c.gap = 0.3;
      check(c);
    }
  }
}

// The variadic ops over one to three broadcast inputs (values distinct: Max and Min have one
// winner per element).
TEST(AutodiffFdElementwiseRandom, VariadicSumMeanMaxMin) {
  Random rnd(8);
  for (const std::string op : {"Sum", "Mean", "Max", "Min"}) {
    for (int k = 0; k < 6; ++k) {
      const Shape out = rnd.shape(rnd.uniform(0, 3), 1, 3);
      const auto [a, b] = rnd.broadcast_pair(out);
      std::vector<Shape> in = {a, b, out};
      in.resize(static_cast<size_t>(1 + k % 3));
      if (in.size() == 1) in[0] = out;
      check({op + "_" + std::to_string(in.size()) + "_" + str(out), in, out,
             [op, out](GradBuilder& g, P p) { return g.op(op, p, f64(out)); }});
    }
  }
}

TEST(AutodiffFdElementwiseRandom, Where) {
  Random rnd(2);
  for (int k = 0; k < 8; ++k) {
    const Shape out = rnd.shape(rnd.uniform(1, 3), 1, 3);
    const auto [a, b] = rnd.broadcast_pair(out);
    const Shape cond_shape = rnd.broadcastable_to(out);
    std::vector<int64_t> bits(static_cast<size_t>(ir::shape_numel(cond_shape)));
    for (int64_t& bit : bits) bit = rnd.uniform(0, 1);
    check({"Where_" + str(cond_shape) + "_" + str(a) + "_" + str(b),
           {a, b},
           out,
           [=](GradBuilder& g, P p) {
             ir::Value* cond =
                 g.op("Less", {int_tensor(g, bits, cond_shape), g.scalar(1, DType::kInt64)},
                      {DType::kBool, cond_shape});
             return g.op("Where", {cond, p[0], p[1]}, f64(out));
           }});
  }
}

Case unary(Random& rnd, const std::string& op, std::vector<Attribute> (*a)() = nullptr) {
  const Shape s = rnd.shape(rnd.uniform(0, 3), 1, 3);
  return {op + "_" + str(s), {s}, s, [=](GradBuilder& g, P p) {
            return g.op(op, {p[0]}, f64(s), a ? a() : std::vector<Attribute>{});
          }};
}

TEST(AutodiffFdElementwiseRandom, Unary) {
  Random rnd(3);
  for (const char* op : {"Neg", "Exp", "Tanh", "Sigmoid", "Erf", "Identity"}) check(unary(rnd, op));
  for (const char* op : {"Log", "Sqrt"}) {  // on the positive reals
    Case c = unary(rnd, op);
    c.lo = 0.3;
    c.hi = 2.0;
    check(c);
  }
  Case relu = unary(rnd, "Relu");
  relu.kinks = {0.0};
  check(relu);
  for (const char* op : {"Sin", "Cos", "Softplus", "Softsign"}) check(unary(rnd, op));
  for (const char* op : {"Abs", "Selu"}) {  // kinked at 0
    Case c = unary(rnd, op);
    c.kinks = {0.0};
    check(c);
  }
  for (const char* op : {"Tan", "Sinh", "Cosh", "Atan", "Asinh"}) check(unary(rnd, op));
  for (const char* op : {"Asin", "Acos", "Atanh"}) {  // inside (-1, 1)
    Case c = unary(rnd, op);
    c.lo = -0.8;
    c.hi = 0.8;
    check(c);
  }
  Case acosh = unary(rnd, "Acosh");  // above 1
  acosh.lo = 1.2;
  acosh.hi = 3.0;
  check(acosh);
  Case reciprocal = unary(rnd, "Reciprocal");  // both signs, away from the pole
  reciprocal.kinks = {0.0};
  reciprocal.gap = 0.3;
  check(reciprocal);
}

// PRelu: the slope a parameter broadcast to x (one per channel, or one for all, as
// torch.nn.PReLU exports it), kinked at x = 0.
TEST(AutodiffFdElementwiseRandom, PRelu) {
  Random rnd(7);
  for (int k = 0; k < 6; ++k) {
    const Shape x = rnd.shape(rnd.uniform(2, 4), 1, 3);
    const Shape slope = k % 2 ? Shape{1} : Shape{x[1]};
    Shape per_channel(x.size() - 1, 1);
    per_channel[0] = slope[0];
    Case c{"PRelu_" + str(x) + "_" + str(slope), {x, slope}, x, [=](GradBuilder& g, P p) {
             ir::Value* s = slope[0] == 1 ? p[1] : g.reshape(p[1], per_channel);
             return g.op("PRelu", {p[0], s}, f64(x));
           }};
    c.kinks = {0.0};
    check(c);
  }
}

TEST(AutodiffFdElementwiseRandom, PowConstantExponent) {
  Random rnd(4);
  // Exponents for x > 0; the integer ones also on negative x. The f32 exponent takes the
  // rule's Cast path (x f64, exponent f32).
  struct Exponent {
    double value;
    DType dtype;
    bool negative_x;
  };
  for (const Exponent& e :
       {Exponent{2.0, DType::kFloat64, true}, Exponent{3.0, DType::kFloat64, true},
        Exponent{0.5, DType::kFloat64, false}, Exponent{-1.5, DType::kFloat64, false},
        Exponent{2.5, DType::kFloat32, false}}) {
    const Shape s = rnd.shape(rnd.uniform(1, 3), 1, 3);
    Case c{"Pow_" + std::to_string(e.value) + "_" + str(s), {s}, s, [=](GradBuilder& g, P p) {
             return g.op("Pow", {p[0], g.scalar(e.value, e.dtype)}, f64(s));
           }};
    c.lo = e.negative_x ? -1.5 : 0.3;
    c.hi = 1.5;
    check(c);
  }
}

TEST(AutodiffFdElementwiseRandom, ActivationsWithAttributes) {
  Random rnd(5);
  for (int k = 0; k < 6; ++k) {
    const Shape s = rnd.shape(rnd.uniform(1, 3), 1, 3);
    const auto alpha = static_cast<float>(rnd.real(0.05, 2.0));
    for (const std::string op : {"LeakyRelu", "Elu"}) {
      Case c{op + "_alpha" + std::to_string(alpha), {s}, s, [=](GradBuilder& g, P p) {
               return g.op(op, {p[0]}, f64(s), attrs(Attribute::make_float("alpha", alpha)));
             }};
      c.kinks = {0.0};
      check(c);
    }
  }
}

TEST(AutodiffFdElementwiseRandom, Clip) {
  Random rnd(6);
  for (int k = 0; k < 8; ++k) {
    const Shape s = rnd.shape(rnd.uniform(1, 3), 2, 4);
    const double lo = rnd.real(-1.0, 0.2), hi = lo + rnd.real(0.3, 1.2);
    const bool has_min = k % 4 != 1, has_max = k % 4 != 2;
    Case c{"Clip_" + str(s) + (has_min ? "_min" : "") + (has_max ? "_max" : ""),
           {s},
           s,
           [=](GradBuilder& g, P p) {
             return g.op("Clip",
                         {p[0], has_min ? g.scalar(lo, DType::kFloat64) : nullptr,
                          has_max ? g.scalar(hi, DType::kFloat64) : nullptr},
                         f64(s));
           }};
    c.kinks = {lo, hi};
    check(c);
  }
}

// Training mode: the mask (fixed by the seed attribute, so the same in every run of the
// finite differences) scales the kept elements by 1 / (1 - ratio).
TEST(AutodiffFdElementwiseRandom, DropoutTraining) {
  Random rnd(7);
  for (int k = 0; k < 5; ++k) {
    const Shape s = rnd.shape(rnd.uniform(1, 3), 2, 4);
    const double ratio = rnd.real(0.1, 0.8);
    const int64_t seed = rnd.uniform(0, 1000);
    check(
        {"Dropout_" + str(s) + "_ratio" + std::to_string(ratio), {s}, s, [=](GradBuilder& g, P p) {
           auto outs =
               g.op_n("Dropout", {p[0], g.scalar(ratio, DType::kFloat64), bool_scalar(g, true)},
                      {f64(s), {DType::kBool, s}}, attrs(Attribute::make_int("seed", seed)));
           return outs[0];
         }});
  }
}

}  // namespace
}  // namespace ampc
