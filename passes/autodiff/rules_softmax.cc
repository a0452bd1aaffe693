// Gradients of Softmax and LogSoftmax (opset 13: along one axis) and of the losses built on
// them, SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (ONNX definitions: per-element
// loss -w[t] * logp[t]; ignored labels weigh 0; mean divides by the sum of the weights).
#include "ops/schemas/ampc_schemas.h"
#include "passes/autodiff/gradient_registry.h"

namespace ampc::passes::autodiff {
namespace {

using ir::Value;
using Shape = std::vector<int64_t>;

ir::Attribute keepdims(int64_t k) {
  return ir::Attribute::make_int("keepdims", k);
}

Value* cast(GradContext& c, Value* v, DType to) {
  if (v->type.dtype == to) return v;
  return c.b.op("Cast", {v}, {to, v->type.shape},
                attrs(ir::Attribute::make_int("to", static_cast<int64_t>(to))));
}

int64_t softmax_axis(GradContext& c) {
  const int64_t axis = c.attr_int("axis", -1);
  return axis < 0 ? axis + static_cast<int64_t>(c.input(0)->type.shape->size()) : axis;
}

// The backward of Softmax (dx = y * (dy - sum(dy * y))) or LogSoftmax (dx = dy - exp(y) *
// sum(dy)) along `axis`, as one op (ampc.SoftmaxGrad; kernels/cuda/softmax.h): the row's sum
// and every dx in one pass over y and dy, in fp32 and rounded once, as PyTorch's softmax
// backward kernels compute it (and one step instead of a product, a reduction and the
// elementwise steps after it).
Value* softmax_grad(GradContext& c, Value* y, Value* dy, int64_t axis, bool log) {
  return c.b.op("SoftmaxGrad", {cast(c, dy, y->type.dtype), y}, y->type,
                attrs(ir::Attribute::make_int("axis", axis), ir::Attribute::make_int("log", log)),
                ops::kAmpcDomain);
}

// Classes up to this count are exact in float32, and so is the comparison of any label with
// them: a label beyond it rounds to a float at least this large, above every class index.
constexpr int64_t kFloatExactClasses = int64_t{1} << 24;

// onehot [N, C, d...] = (labels [N, 1, d...] == arange(C) [1, C, 1...]). Compared in float32
// (the labels cast, [N, d...] elements) where that is exact: the fuser joins a float comparison
// to the gradient's elementwise kernel (lower/fusion.cc), so the [N, C] booleans are never
// stored; an int64 comparison is a step of its own (6 ms for 512 x 32000 on 2 cores).
Value* one_hot(GradContext& c, Value* labels, const Shape& unsq, const Shape& xs) {
  const int64_t classes = xs[1];
  Shape range_shape(xs.size(), 1);
  range_shape[1] = classes;
  Value* rows = c.b.reshape(labels, unsq);
  Value* range = nullptr;
  if (classes <= kFloatExactClasses) {
    std::vector<double> values(static_cast<size_t>(classes));
    for (int64_t k = 0; k < classes; ++k) values[static_cast<size_t>(k)] = static_cast<double>(k);
    range = c.b.floats(values, DType::kFloat32);
    rows = cast(c, rows, DType::kFloat32);
  } else {
    std::vector<int64_t> values(static_cast<size_t>(classes));
    for (int64_t k = 0; k < classes; ++k) values[static_cast<size_t>(k)] = k;
    range = c.b.ints(values);
  }
  return c.b.op("Equal", {rows, c.b.reshape(range, range_shape)}, {DType::kBool, xs});
}

// NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss with x [N, C, d...], labels [N, d...]:
// returns dL/dx through the loss output, i.e. -g * onehot(label) with
// g = dL/dloss_i * w_i (/ sum of w for mean), or null when the loss output has no gradient.
// When `row_weight` is given it receives g as [N, 1, d...]: the negated sum of the result
// over the classes (every label picks exactly one class; an ignored one has g = 0).
Value* loss_grad(GradContext& c, Value** row_weight = nullptr) {
  if (c.needs(2)) {
    // torch writes a loss's `weight` buffer as an initializer, which is trained unless frozen.
    const Value* w = c.input(2);
    c.fail("class weights must be constant" +
           (w->is_initializer() ? "; '" + w->name +
                                      "' is trained as a parameter: if it is a buffer "
                                      "(CrossEntropyLoss(weight=...)), freeze it (--freeze '" +
                                      w->name + "')"
                                : std::string()));
  }
  Value* dloss = c.output_grad(0);
  if (!dloss) return nullptr;
  Value* x = c.input(0);
  const Shape& xs = *x->type.shape;
  // The loss's type: the scores' but for ampc.SoftmaxCrossEntropyLoss (16-bit scores read
  // widened, float outputs), whose gradient is computed in float as Cast + the ONNX op's is.
  const DType t = c.node().outputs[0]->type.dtype;
  const ir::TensorType dx_type{t, xs};
  Value* labels = cast(c, c.input(1), DType::kInt64);
  const Shape& ls = *labels->type.shape;
  const ir::TensorType per_label{t, ls};

  // w_i: class weight of each label, 0 where the label is ignored.
  Value* keep = nullptr;
  if (c.node().attr("ignore_index")) {
    Value* ignore = c.b.scalar(static_cast<double>(c.attr_int("ignore_index", 0)), DType::kInt64);
    Value* ignored = c.b.op("Equal", {labels, ignore}, {DType::kBool, ls});
    keep = c.b.op("Not", {ignored}, {DType::kBool, ls});
    labels = c.b.op("Where", {keep, labels, c.b.scalar(0, DType::kInt64)}, labels->type);
  }
  Value* w = nullptr;
  if (c.input(2)) w = c.b.op("Gather", {c.input(2), labels}, per_label, attrs());
  if (keep) w = w ? c.b.mul(w, cast(c, keep, t)) : cast(c, keep, t);
  if (!w) w = c.b.filled(1.0, per_label);

  const std::string reduction = c.node().attr("reduction") ? c.node().attr("reduction")->s : "mean";
  Value* g = c.b.mul(w, dloss);  // dloss: per label (none) or a scalar
  if (reduction == "mean") {
    Value* total = c.b.op("ReduceSum", {w}, {t, Shape{}}, attrs(keepdims(0)));
    g = c.b.op("Div", {g, total}, g->type);
  } else if (reduction != "none" && reduction != "sum") {
    c.fail("unknown reduction '" + reduction + "'");
  }

  Shape unsq = ls;
  unsq.insert(unsq.begin() + 1, 1);
  Value* onehot = one_hot(c, labels, unsq, xs);
  Value* g_rows = c.b.reshape(g, unsq);
  if (row_weight) *row_weight = g_rows;
  Value* picked = c.b.op("Where", {onehot, g_rows, c.b.scalar(0.0, t)}, dx_type);
  return c.b.op("Neg", {picked}, dx_type);
}

void nll_loss(GradContext& c) {
  if (Value* dx = loss_grad(c)) c.set_input_grad(0, dx);
}

// Through log_prob = LogSoftmax(scores, axis 1): the loss's gradient plus that of output 1, in
// the outputs' type, rounded once to the scores' (ampc.SoftmaxCrossEntropyLoss: the backward of
// the Cast it folds in).
void softmax_cross_entropy(GradContext& c) {
  Value* g_rows = nullptr;
  Value* dlogp = loss_grad(c, &g_rows);
  Value* d1 = c.output_grad(1);
  if (d1) dlogp = dlogp ? c.b.add(dlogp, d1) : d1;
  if (!dlogp) return;
  Value* logp = c.output(1);
  const DType scores_type = c.input(0)->type.dtype;
  if (!logp) {
    Value* scores = cast(c, c.input(0), dlogp->type.dtype);
    logp = c.b.op("LogSoftmax", {scores}, scores->type, attrs(ir::Attribute::make_int("axis", 1)));
  }
  if (d1) return c.set_input_grad(0, cast(c, softmax_grad(c, logp, dlogp, 1, true), scores_type));
  // Through the loss only, sum(dlogp) over the classes is -g: dx = dlogp + exp(logp) * g,
  // the same numbers as the LogSoftmax backward (a sum of zeros and one value is exact) without
  // the [N, C] reduction, so dlogp never needs storing: the whole gradient is one kernel.
  Value* p = c.b.op("Exp", {logp}, logp->type);
  Value* dx = c.b.op("Add", {dlogp, c.b.mul(p, g_rows)}, dlogp->type);
  c.set_input_grad(0, cast(c, dx, scores_type));
}

}  // namespace

void register_softmax_gradients(GradientRegistry& r) {
  r.add("Softmax", [](GradContext& c) {
    c.set_input_grad(0, softmax_grad(c, c.output(0), c.output_grad(0), softmax_axis(c), false));
  });
  r.add("LogSoftmax", [](GradContext& c) {
    c.set_input_grad(0, softmax_grad(c, c.output(0), c.output_grad(0), softmax_axis(c), true));
  });
  r.add("NegativeLogLikelihoodLoss", nll_loss);
  r.add("SoftmaxCrossEntropyLoss", softmax_cross_entropy);
  r.add(ops::OpKey(ops::kAmpcDomain, "SoftmaxCrossEntropyLoss"), softmax_cross_entropy);
}

}  // namespace ampc::passes::autodiff
