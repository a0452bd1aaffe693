#include "passes/recurrent_cells.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"

namespace ampc::passes::recurrent {
namespace {

using autodiff::attrs;
using autodiff::GradBuilder;
using ir::Value;

ir::TensorType like(const Value* x, std::vector<int64_t> shape) {
  return {x->type.dtype, std::move(shape)};
}

Value* binary(GradBuilder& b, const char* op, Value* a, Value* c) {
  // Operands broadcast to the larger one; the callers' scalars and vectors are trailing.
  const auto& sa = *a->type.shape;
  const auto& sc = *c->type.shape;
  return b.op(op, {a, c}, like(a, sa.size() >= sc.size() ? sa : sc));
}

Value* unary(GradBuilder& b, const char* op, Value* x) {
  return b.op(op, {x}, x->type);
}

// Columns [begin, end) of the last axis.
Value* columns(GradBuilder& b, Value* x, int64_t begin, int64_t end) {
  auto shape = *x->type.shape;
  const auto axis = static_cast<int64_t>(shape.size()) - 1;
  shape.back() = end - begin;
  return b.op("Slice", {x, b.ints({begin}), b.ints({end}), b.ints({axis})}, like(x, shape));
}

// `x` split into `parts` equal pieces along the last axis.
std::vector<Value*> split_last(GradBuilder& b, Value* x, int64_t parts) {
  auto shape = *x->type.shape;
  const int64_t piece = shape.back() / parts;
  shape.back() = piece;
  if (parts == 1) return {x};
  return b.op_n("Split", {x, b.ints(std::vector<int64_t>(static_cast<size_t>(parts), piece))},
                std::vector<ir::TensorType>(static_cast<size_t>(parts), like(x, shape)),
                attrs(ir::Attribute::make_int("axis", static_cast<int64_t>(shape.size()) - 1)));
}

class Unroller {
 public:
  Unroller(GradBuilder& b, const LayerSpec& spec, const DirectionInputs& in)
      : b_(b), spec_(spec), in_(in), hidden_(spec.hidden) {}

  DirectionOutputs run();

 private:
  const Activation& act(size_t k) const { return spec_.activations[in_.first_activation + k]; }
  // a @ b_t, cast back to the layer's float type when asked (autocast keeps that Cast).
  Value* project(Value* a, Value* b_t) {
    auto shape = *a->type.shape;
    shape.back() = b_t->type.shape->back();
    Value* y = b_.op("MatMul", {a, b_t}, like(a, shape));
    if (!spec_.cast_projections) return y;
    return b_.op("Cast", {y}, like(y, shape),
                 attrs(ir::Attribute::make_int("to", static_cast<int64_t>(spec_.dtype))));
  }
  Value* transposed(Value* w) {
    const auto& s = *w->type.shape;
    return b_.op("Transpose", {w}, like(w, {s[1], s[0]}),
                 attrs(ir::Attribute::make_ints("perm", {1, 0})));
  }
  // The activation of a gate's pre-activation, clipped first when the node has `clip`.
  Value* gate(size_t k, Value* pre) {
    if (spec_.clip) {
      pre = b_.op("Clip",
                  {pre, b_.scalar(-*spec_.clip, spec_.dtype), b_.scalar(*spec_.clip, spec_.dtype)},
                  pre->type);
    }
    return apply_activation(b_, act(k), pre);
  }
  Value* zeros() { return b_.filled(0, {spec_.dtype, std::vector<int64_t>{spec_.batch, hidden_}}); }
  Value* one() { return b_.scalar(1, spec_.dtype); }

  Value* lstm_step(Value* x_t, Value*& c);
  Value* gru_step(Value* x_t);

  GradBuilder& b_;
  const LayerSpec& spec_;
  const DirectionInputs& in_;
  const int64_t hidden_;
  Value* h_ = nullptr;
  Value* r_t_ = nullptr;      // R^T [hidden, gates*hidden] (LSTM, RNN, GRU linear_before_reset)
  Value* r_zr_t_ = nullptr;   // GRU: Rz, Rr transposed [hidden, 2*hidden]
  Value* r_h_t_ = nullptr;    // GRU: Rh transposed [hidden, hidden]
  Value* gru_rbh_ = nullptr;  // GRU: Rbh [hidden], added on the recurrent side
};

// i, o, f, c gates (the spec's order); peepholes P = [Pi, Po, Pf].
Value* Unroller::lstm_step(Value* x_t, Value*& c) {
  Value* pre = binary(b_, "Add", x_t, project(h_, r_t_));
  auto g = split_last(b_, pre, 4);
  Value *i = g[0], *o = g[1], *f = g[2], *cand = g[3];
  std::vector<Value*> p;
  if (in_.p) p = split_last(b_, in_.p, 3);
  if (in_.p) {
    i = binary(b_, "Add", i, binary(b_, "Mul", p[0], c));
    f = binary(b_, "Add", f, binary(b_, "Mul", p[2], c));
  }
  i = gate(0, i);
  f = spec_.input_forget ? binary(b_, "Sub", one(), i) : gate(0, f);
  cand = gate(1, cand);
  c = binary(b_, "Add", binary(b_, "Mul", f, c), binary(b_, "Mul", i, cand));
  if (in_.p) o = binary(b_, "Add", o, binary(b_, "Mul", p[1], c));
  o = gate(0, o);
  return binary(b_, "Mul", o, apply_activation(b_, act(2), c));
}

// z, r, h gates; x_t already holds Wb (and Rbz, Rbr).
Value* Unroller::gru_step(Value* x_t) {
  auto x = split_last(b_, x_t, 3);
  Value* h_h = nullptr;  // the recurrent side of the candidate
  Value *z_h, *r_h;
  if (spec_.linear_before_reset) {
    auto hr = split_last(b_, project(h_, r_t_), 3);
    z_h = hr[0];
    r_h = hr[1];
    h_h = gru_rbh_ ? binary(b_, "Add", hr[2], gru_rbh_) : hr[2];
  } else {
    auto hr = split_last(b_, project(h_, r_zr_t_), 2);
    z_h = hr[0];
    r_h = hr[1];
  }
  Value* z = gate(0, binary(b_, "Add", x[0], z_h));
  Value* r = gate(0, binary(b_, "Add", x[1], r_h));
  if (spec_.linear_before_reset) {
    h_h = binary(b_, "Mul", r, h_h);
  } else {
    h_h = project(binary(b_, "Mul", r, h_), r_h_t_);
    if (gru_rbh_) h_h = binary(b_, "Add", h_h, gru_rbh_);
  }
  Value* cand = gate(1, binary(b_, "Add", x[2], h_h));
  // (1 - z) * candidate + z * h
  return binary(b_, "Add", binary(b_, "Mul", binary(b_, "Sub", one(), z), cand),
                binary(b_, "Mul", z, h_));
}

DirectionOutputs Unroller::run() {
  const int64_t gh = spec_.gates() * hidden_;
  // Input projection of every time step at once, with the biases that do not depend on h.
  Value* xw = project(in_.x, transposed(in_.w));
  Value* bias = in_.wb;
  if (in_.rb && spec_.cell != CellKind::kGRU) {
    bias = binary(b_, "Add", in_.wb, in_.rb);
  } else if (in_.rb) {  // GRU: Rbz, Rbr join the input side, Rbh stays with the recurrence
    Value* zr =
        binary(b_, "Add", columns(b_, in_.wb, 0, 2 * hidden_), columns(b_, in_.rb, 0, 2 * hidden_));
    bias = b_.op("Concat", {zr, columns(b_, in_.wb, 2 * hidden_, gh)}, in_.wb->type,
                 attrs(ir::Attribute::make_int("axis", 0)));
    gru_rbh_ = columns(b_, in_.rb, 2 * hidden_, gh);
  }
  if (bias) xw = binary(b_, "Add", xw, bias);
  std::vector<Value*> steps = {xw};
  if (spec_.seq > 1) {
    steps = b_.op_n(
        "Split", {xw, b_.ints(std::vector<int64_t>(static_cast<size_t>(spec_.seq), 1))},
        std::vector<ir::TensorType>(static_cast<size_t>(spec_.seq), like(xw, {1, spec_.batch, gh})),
        attrs(ir::Attribute::make_int("axis", 0)));
  }
  for (Value*& s : steps) s = b_.reshape(s, {spec_.batch, gh});

  r_t_ = transposed(in_.r);
  if (spec_.cell == CellKind::kGRU && !spec_.linear_before_reset) {
    r_zr_t_ = columns(b_, r_t_, 0, 2 * hidden_);
    r_h_t_ = columns(b_, r_t_, 2 * hidden_, gh);
  }
  h_ = in_.h0 ? in_.h0 : zeros();
  Value* c = spec_.cell == CellKind::kLSTM ? (in_.c0 ? in_.c0 : zeros()) : nullptr;
  Value* lengths = in_.lengths;
  DirectionOutputs out;
  out.y.resize(static_cast<size_t>(spec_.seq));
  for (int64_t k = 0; k < spec_.seq; ++k) {
    const int64_t t = in_.reverse ? spec_.seq - 1 - k : k;
    Value* x_t = steps[static_cast<size_t>(t)];
    Value* c_new = c;
    Value* h_new = spec_.cell == CellKind::kLSTM ? lstm_step(x_t, c_new)
                   : spec_.cell == CellKind::kGRU
                       ? gru_step(x_t)
                       : gate(0, binary(b_, "Add", x_t, project(h_, r_t_)));
    Value* y = h_new;
    if (lengths) {
      // Steps at or past a sequence's length keep the state and output zeros; a reverse
      // direction thus starts at its sequence's last step.
      Value* live = b_.op("Less", {b_.scalar(static_cast<double>(t), DType::kInt64), lengths},
                          {DType::kBool, std::vector<int64_t>{spec_.batch}});
      live = b_.reshape(live, {spec_.batch, 1});
      h_new = b_.op("Where", {live, h_new, h_}, h_new->type);
      if (c) c_new = b_.op("Where", {live, c_new, c}, c_new->type);
      y = b_.op("Where", {live, y, b_.scalar(0, spec_.dtype)}, y->type);
    }
    h_ = h_new;
    c = c_new;
    out.y[static_cast<size_t>(t)] = y;
  }
  out.h = h_;
  out.c = c;
  return out;
}

}  // namespace

DirectionOutputs unroll_direction(GradBuilder& b, const LayerSpec& spec,
                                  const DirectionInputs& in) {
  return Unroller(b, spec, in).run();
}

bool activation_defaults(std::string& name, bool& uses_alpha, bool& uses_beta, float& alpha,
                         float& beta) {
  struct Known {
    const char* name;
    bool alpha, beta;
    float a, b;
  };
  static const Known known[] = {
      {"Sigmoid", false, false, 0, 0},
      {"Tanh", false, false, 0, 0},
      {"Relu", false, false, 0, 0},
      {"Softsign", false, false, 0, 0},
      {"Softplus", false, false, 0, 0},
      {"LeakyRelu", true, false, 0.01f, 0},
      {"ThresholdedRelu", true, false, 1, 0},
      {"Elu", true, false, 1, 0},
      {"Affine", true, true, 1, 0},
      {"ScaledTanh", true, true, 1, 1},
      {"HardSigmoid", true, true, 0.2f, 0.5f},
  };
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char ch) { return std::tolower(ch); });
  for (const Known& k : known) {
    std::string kl = k.name;
    std::transform(kl.begin(), kl.end(), kl.begin(),
                   [](unsigned char ch) { return std::tolower(ch); });
    if (kl != lower) continue;
    name = k.name;
    uses_alpha = k.alpha;
    uses_beta = k.beta;
    alpha = k.a;
    beta = k.b;
    return true;
  }
  return false;
}

Value* apply_activation(GradBuilder& b, const Activation& a, Value* x) {
  const DType dt = x->type.dtype;
  const std::string& n = a.name;
  if (n == "Sigmoid" || n == "Tanh" || n == "Relu") return unary(b, n.c_str(), x);
  if (n == "LeakyRelu" || n == "Elu") {
    return b.op(n, {x}, x->type, attrs(ir::Attribute::make_float("alpha", a.alpha)));
  }
  if (n == "Affine")
    return binary(b, "Add", binary(b, "Mul", x, b.scalar(a.alpha, dt)), b.scalar(a.beta, dt));
  if (n == "ScaledTanh") {
    return binary(b, "Mul", unary(b, "Tanh", binary(b, "Mul", x, b.scalar(a.beta, dt))),
                  b.scalar(a.alpha, dt));
  }
  if (n == "HardSigmoid") {
    Value* lin = binary(b, "Add", binary(b, "Mul", x, b.scalar(a.alpha, dt)), b.scalar(a.beta, dt));
    return b.op("Clip", {lin, b.scalar(0, dt), b.scalar(1, dt)}, x->type);
  }
  if (n == "ThresholdedRelu") {
    Value* above = b.op("Greater", {x, b.scalar(a.alpha, dt)}, {DType::kBool, x->type.shape});
    return b.op("Where", {above, x, b.scalar(0, dt)}, x->type);
  }
  if (n == "Softsign") {  // x / (1 + |x|), |x| as Where (Abs has no gradient rule)
    Value* negative = b.op("Less", {x, b.scalar(0, dt)}, {DType::kBool, x->type.shape});
    Value* abs = b.op("Where", {negative, unary(b, "Neg", x), x}, x->type);
    return binary(b, "Div", x, binary(b, "Add", abs, b.scalar(1, dt)));
  }
  if (n == "Softplus")
    return unary(b, "Log", binary(b, "Add", unary(b, "Exp", x), b.scalar(1, dt)));
  throw Error("internal: recurrent activation '" + n + "'");
}

}  // namespace ampc::passes::recurrent
