// Gradients of Conv, ConvTranspose, the pooling ops and the normalisation layers. Conv,
// MaxPool (GlobalMaxPool as a MaxPool over the whole map), AveragePool and ConvTranspose's
// weights use the gradient ops of the "ampc" domain (ampc_schemas.h) with the forward node's
// attributes, auto_pad resolved into explicit pads, and so do BatchNormalization in training
// mode and LayerNormalization;
// GlobalAveragePool, BatchNormalization in inference mode, InstanceNormalization and
// LpNormalization are built from standard ops.
#include <algorithm>

#include "ops/schemas/ampc_schemas.h"
#include "passes/autodiff/gradient_registry.h"

namespace ampc::passes::autodiff {
namespace {

using ir::Attribute;
using ir::TensorType;
using ir::Value;
using ops::kAmpcDomain;
using Shape = std::vector<int64_t>;

Shape ints_attr(GradContext& c, const char* name, Shape fallback) {
  const Attribute* a = c.node().attr(name);
  return a ? a->ints : fallback;
}

// The forward node's window attributes for input X (spatial sizes `in`) and kernel, with
// auto_pad turned into explicit pads.
std::vector<Attribute> window_attrs(GradContext& c, const Shape& in, const Shape& kernel) {
  const size_t n = in.size();
  const Shape strides = ints_attr(c, "strides", Shape(n, 1));
  const Shape dilations = ints_attr(c, "dilations", Shape(n, 1));
  Shape pads = ints_attr(c, "pads", Shape(2 * n, 0));
  const Attribute* ap = c.node().attr("auto_pad");
  const std::string auto_pad = ap ? ap->s : "NOTSET";
  if (strides.size() != n || dilations.size() != n || pads.size() != 2 * n || kernel.size() != n)
    c.fail("kernel_shape, strides, dilations or pads do not match the input");
  for (size_t i = 0; i < n; ++i) {
    if (auto_pad == "VALID") {
      pads[i] = pads[i + n] = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in[i] + strides[i] - 1) / strides[i];
      const int64_t eff = (kernel[i] - 1) * dilations[i] + 1;
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + eff - in[i]);
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + n] = total - pads[i];
    } else if (auto_pad != "NOTSET") {
      c.fail("auto_pad '" + auto_pad + "' is not supported");
    }
  }
  return attrs(Attribute::make_ints("kernel_shape", kernel),
               Attribute::make_ints("strides", strides),
               Attribute::make_ints("dilations", dilations), Attribute::make_ints("pads", pads));
}

Shape spatial(const Value* v, size_t from = 2) {
  const Shape& s = *v->type.shape;
  return Shape(s.begin() + static_cast<std::ptrdiff_t>(from), s.end());
}

void conv(GradContext& c) {
  Value* x = c.input(0);
  Value* w = c.input(1);
  if (x->type.shape->size() < 3) c.fail("Conv needs at least one spatial dimension");
  auto a = window_attrs(c, spatial(x), spatial(w));
  a.push_back(Attribute::make_int("group", c.attr_int("group", 1)));
  const int64_t m = (*w->type.shape)[0];
  auto grads = c.b.op_n("ConvGrad", {c.output_grad(0), x, w},
                        {x->type, w->type, {w->type.dtype, Shape{m}}}, std::move(a), kAmpcDomain);
  for (size_t i = 0; i < 3; ++i) {
    if (c.needs(i)) c.set_input_grad(i, grads[i]);
  }
}

// ConvTranspose: Y[co, i s + k d - pb] += X[ci, i] W[ci, co, k] within each group. So dX
// is the Conv of dY with W (same strides, dilations, group; begin pads pb, end pads that
// make X's size), dW is ConvGrad's weight gradient for that Conv with the roles of X and dY
// swapped, and dB sums dY over the batch and the spatial axes.
void conv_transpose(GradContext& c) {
  Value* x = c.input(0);
  Value* w = c.input(1);
  Value* dy = c.output_grad(0);
  const Shape in = spatial(x), kernel = spatial(w), out = spatial(c.output(0));
  const size_t n = in.size();
  if (n == 0) c.fail("ConvTranspose needs at least one spatial dimension");
  const Shape strides = ints_attr(c, "strides", Shape(n, 1));
  const Shape dilations = ints_attr(c, "dilations", Shape(n, 1));
  const Shape out_pad = ints_attr(c, "output_padding", Shape(n, 0));
  const Shape explicit_pads = ints_attr(c, "pads", Shape(2 * n, 0));
  if (strides.size() != n || dilations.size() != n || out_pad.size() != n ||
      explicit_pads.size() != 2 * n || kernel.size() != n)
    c.fail("strides, dilations, output_padding or pads do not match the input");
  const Attribute* ap = c.node().attr("auto_pad");
  const std::string auto_pad = ap ? ap->s : "NOTSET";
  const bool output_shape = c.node().attr("output_shape") != nullptr;
  Shape pads(2 * n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t reach = strides[i] * (in[i] - 1) + (kernel[i] - 1) * dilations[i] + 1;
    // Begin pad as the ONNX definition derives it (total = reach + output_padding - out).
    const int64_t total = reach + out_pad[i] - out[i];
    int64_t begin = explicit_pads[i];
    if (auto_pad == "VALID") {
      begin = 0;
    } else if (auto_pad == "SAME_UPPER") {
      begin = total / 2;
    } else if (auto_pad == "SAME_LOWER" || output_shape) {
      begin = total - total / 2;
    } else if (auto_pad != "NOTSET") {
      c.fail("auto_pad '" + auto_pad + "' is not supported");
    }
    // Output positions past the last window (output_padding) take no part in dX.
    const int64_t end = reach - out[i] - begin;
    if (begin < 0 || end <= -strides[i]) c.fail("this ConvTranspose padding is not differentiable");
    pads[i] = begin;
    pads[i + n] = std::max<int64_t>(end, 0);
  }
  auto window = [&] {
    return attrs(Attribute::make_ints("kernel_shape", kernel),
                 Attribute::make_ints("strides", strides),
                 Attribute::make_ints("dilations", dilations), Attribute::make_ints("pads", pads),
                 Attribute::make_int("group", c.attr_int("group", 1)));
  };
  // ampc.ConvTranspose (bf16) has its dX computed by ampc.Conv, the Conv that allows bf16.
  const bool bf16_form = c.node().domain == kAmpcDomain;
  if (c.needs(0))
    c.set_input_grad(0, c.b.op("Conv", {dy, w}, x->type, window(), bf16_form ? kAmpcDomain : ""));
  if (c.needs(1)) {
    const int64_t m = (*w->type.shape)[0];
    auto grads = c.b.op_n("ConvGrad", {x, dy, w}, {dy->type, w->type, {w->type.dtype, Shape{m}}},
                          window(), kAmpcDomain);
    c.set_input_grad(1, grads[1]);
  }
  if (c.needs(2)) {
    Shape axes = {0};
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i + 2));
    c.set_input_grad(2, c.b.op("ReduceSum", {dy, c.b.ints(axes)}, c.input(2)->type,
                               attrs(Attribute::make_int("keepdims", 0))));
  }
}

void pool(GradContext& c, bool max) {
  if (c.output_grad(1)) c.fail("MaxPool's Indices output has no gradient");
  Value* x = c.input(0);
  auto a = window_attrs(c, spatial(x), ints_attr(c, "kernel_shape", {}));
  a.push_back(Attribute::make_int("ceil_mode", c.attr_int("ceil_mode", 0)));
  if (!max)
    a.push_back(Attribute::make_int("count_include_pad", c.attr_int("count_include_pad", 0)));
  c.set_input_grad(0, c.b.op(max ? "MaxPoolGrad" : "AveragePoolGrad", {c.output_grad(0), x},
                             x->type, std::move(a), kAmpcDomain));
}

// GlobalMaxPool (torch's AdaptiveMaxPool(1)) is a MaxPool whose window is the whole map: its
// gradient is that MaxPool's, all of it to the first maximum, as PyTorch's.
void global_max_pool(GradContext& c) {
  Value* x = c.input(0);
  const Shape map = spatial(x);
  auto a = window_attrs(c, map, map);
  a.push_back(Attribute::make_int("ceil_mode", 0));
  c.set_input_grad(
      0, c.b.op("MaxPoolGrad", {c.output_grad(0), x}, x->type, std::move(a), kAmpcDomain));
}

void global_average_pool(GradContext& c) {
  const TensorType& t = c.input(0)->type;
  double count = 1;
  for (int64_t d : spatial(c.input(0))) count *= static_cast<double>(d);
  Value* dy = c.output_grad(0);
  Value* share = c.b.op("Div", {dy, c.b.scalar(count, t.dtype)}, dy->type);
  c.set_input_grad(0, c.b.op("Expand", {share, c.b.ints(*t.shape)}, t));
}

// Statistics over `axes` of x (shape kept, size-1 on the reduced axes).
struct Moments {
  GradBuilder& b;
  const TensorType x_type;
  Shape axes;
  Shape kept;
  double count = 1;

  Moments(GradBuilder& builder, const TensorType& t, Shape reduce) : b(builder), x_type(t) {
    kept = *t.shape;
    for (int64_t a : reduce) {
      count *= static_cast<double>(kept[static_cast<size_t>(a)]);
      kept[static_cast<size_t>(a)] = 1;
    }
    axes = std::move(reduce);
  }
  Value* sum(Value* v) {
    return b.op("ReduceSum", {v, b.ints(axes)}, {x_type.dtype, kept},
                attrs(Attribute::make_int("keepdims", 1)));
  }
  Value* mean(Value* v) { return over_count(sum(v)); }
  // A sum over the axes divided by their element count.
  Value* over_count(Value* s) {
    return b.op("Div", {s, b.scalar(count, x_type.dtype)}, {x_type.dtype, kept});
  }
  Value* full(const std::string& op, Value* l, Value* r) { return b.op(op, {l, r}, x_type); }
  // 1 / sqrt(var + eps) of the biased variance about `mu`; sets *centred = x - mu.
  Value* inv_std(Value* x, Value* mu, double eps, Value** centred) {
    *centred = full("Sub", x, mu);
    Value* var = mean(full("Mul", *centred, *centred));
    Value* shifted = b.op("Add", {var, b.scalar(eps, x_type.dtype)}, var->type);
    Value* root = b.op("Sqrt", {shifted}, var->type);
    return b.op("Div", {b.scalar(1.0, x_type.dtype), root}, var->type);
  }
  // dX of y = xhat * g-scale given g = dY * scale: inv * (g - mean(g) - xhat * mean(g xhat)).
  Value* normalized_grad(Value* g, Value* xhat, Value* inv) {
    Value* gm = mean(g);
    Value* gx = mean(full("Mul", g, xhat));
    Value* centred = full("Sub", full("Sub", g, gm), full("Mul", xhat, gx));
    return full("Mul", centred, inv);
  }
};

// [C] -> [1, C, 1, ...] to broadcast against an [N, C, ...] tensor.
Value* per_channel(GradBuilder& b, Value* v, size_t rank) {
  Shape s(rank, 1);
  s[1] = (*v->type.shape)[0];
  return b.reshape(v, s);
}

void batch_norm(GradContext& c) {
  GradBuilder& b = c.b;
  for (size_t i = 1; i < 3; ++i) {
    if (c.output_grad(i)) c.fail("the running mean and variance outputs have no gradient");
  }
  // Mixed precision (opset 15): a 16-bit X with fp32 scale, bias and statistics is
  // differentiated in the parameters' dtype, as PyTorch's fused backward computes in fp32,
  // and dX is rounded once to X's dtype.
  const DType x_dtype = c.input(0)->type.dtype;
  const DType param_dtype = c.input(1)->type.dtype;
  const double eps = c.attr_float("epsilon", 1e-5f);
  // Before opset 14 there is no training_mode: the optional outputs select training.
  const bool training = c.node().attr("training_mode") ? c.attr_int("training_mode", 0) != 0
                                                       : c.node().outputs.size() > 1;
  if (training) {
    // One op, as PyTorch's fused backward (kernels/cuda/batchnorm.h, its CPU twin): the batch
    // statistics recomputed from X in the forward's order, dB = sum(dY), dScale =
    // sum(dY (X - mean)) / std and dX = (dY - mean(dY) - xhat mean(dY xhat)) scale / std, in
    // the parameters' precision from dY and X in their own, dX rounded once. A pass over X for
    // the mean, one over X and dY for the variance and both sums, one for dX, instead of four
    // reductions and the elementwise steps between them.
    auto grads = b.op_n(
        "BatchNormalizationGrad", {b.cast(c.output_grad(0), x_dtype), c.input(0), c.input(1)},
        {c.input(0)->type, c.input(1)->type, c.input(2)->type},
        attrs(Attribute::make_float("epsilon", static_cast<float>(eps))), kAmpcDomain);
    for (size_t i = 0; i < 3; ++i) {
      if (c.needs(i)) c.set_input_grad(i, grads[i]);
    }
    return;  // the statistics come from x; running mean and var have none
  }
  Value* x = b.cast(c.input(0), param_dtype);
  const size_t rank = x->type.shape->size();
  Shape axes = {0};
  for (size_t i = 2; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  Moments m(b, x->type, axes);
  Value* dy = b.cast(c.output_grad(0), param_dtype);
  Value* scale = per_channel(b, c.input(1), rank);
  // Inference mode: an affine map with the running statistics.
  Value* var = per_channel(b, c.input(4), rank);
  Value* centred = m.full("Sub", x, per_channel(b, c.input(3), rank));
  Value* shifted = b.op("Add", {var, b.scalar(eps, var->type.dtype)}, var->type);
  Value* inv =
      b.op("Div", {b.scalar(1.0, var->type.dtype), b.op("Sqrt", {shifted}, var->type)}, var->type);
  Value* xhat = m.full("Mul", centred, inv);
  auto channel = [&](Value* v, size_t input) {
    return b.reshape(m.sum(v), *c.input(input)->type.shape);
  };
  if (c.needs(2)) c.set_input_grad(2, channel(dy, 2));
  if (c.needs(1)) c.set_input_grad(1, channel(m.full("Mul", dy, xhat), 1));
  Value* g = m.full("Mul", dy, scale);  // dL/dxhat
  if (c.needs(0)) c.set_input_grad(0, b.cast(m.full("Mul", g, inv), x_dtype));
  if (c.needs(3))
    c.set_input_grad(3, b.op("Neg", {channel(m.full("Mul", g, inv), 3)}, c.input(3)->type));
  if (c.needs(4)) {  // dxhat/dvar = -xhat * inv^2 / 2
    Value* half_inv2 =
        b.op("Mul", {b.op("Mul", {inv, inv}, inv->type), b.scalar(-0.5, x->type.dtype)}, inv->type);
    c.set_input_grad(4, channel(m.full("Mul", m.full("Mul", g, xhat), half_inv2), 4));
  }
}

// One op, as PyTorch's fused backward (kernels/cuda/layernorm.h, its CPU twin): the statistics
// recomputed from X in the forward's order, dX = (g - mean(g) - xhat mean(g xhat)) / std with
// g = dY scale, dScale = sum(dY xhat) and dB = sum(dY) over the rows, in fp32 (fp64 for f64),
// each rounded once: a pass over each row instead of about fifteen ops between the forward's
// saved statistics and the gradients. expand_norm_params has given scale the normalised shape.
void layer_norm(GradContext& c) {
  GradBuilder& b = c.b;
  if (c.output_grad(1) || c.output_grad(2))
    c.fail("the Mean and InvStdDev outputs have no gradient");
  Value* x = c.input(0);
  const auto rank = static_cast<int64_t>(x->type.shape->size());
  int64_t axis = c.attr_int("axis", -1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) c.fail("attribute 'axis' is out of range");
  const Shape normalised(x->type.shape->begin() + axis, x->type.shape->end());
  const TensorType& scale = c.input(1)->type;
  if (!scale.shape || *scale.shape != normalised)
    c.fail("scale " + scale.str() + " does not have the normalised shape");
  auto grads =
      b.op_n("LayerNormalizationGrad", {b.cast(c.output_grad(0), x->type.dtype), x, c.input(1)},
             {x->type, scale, scale},
             attrs(Attribute::make_int("axis", axis),
                   Attribute::make_float("epsilon", c.attr_float("epsilon", 1e-5f))),
             kAmpcDomain);
  for (size_t i = 0; i < 3; ++i) {
    if (c.needs(i)) c.set_input_grad(i, grads[i]);
  }
}

// InstanceNormalization (torch's GroupNorm and InstanceNorm export through it): statistics
// per sample and channel over the spatial axes, scale and bias per channel.
void instance_norm(GradContext& c) {
  GradBuilder& b = c.b;
  Value* x = c.input(0);
  const size_t rank = x->type.shape->size();
  Shape spatial_axes;
  for (size_t i = 2; i < rank; ++i) spatial_axes.push_back(static_cast<int64_t>(i));
  Moments m(b, x->type, spatial_axes);
  Value* centred = nullptr;
  Value* inv = m.inv_std(x, m.mean(x), c.attr_float("epsilon", 1e-5f), &centred);
  Value* xhat = m.full("Mul", centred, inv);
  Value* dy = c.output_grad(0);
  Shape channel_axes = {0};
  for (int64_t a : spatial_axes) channel_axes.push_back(a);
  Moments per_c(b, x->type, channel_axes);
  auto channel = [&](Value* v, size_t input) {
    return b.reshape(per_c.sum(v), *c.input(input)->type.shape);
  };
  if (c.needs(2)) c.set_input_grad(2, channel(dy, 2));
  if (c.needs(1)) c.set_input_grad(1, channel(m.full("Mul", dy, xhat), 1));
  if (c.needs(0)) {
    Value* g = m.full("Mul", dy, per_channel(b, c.input(1), rank));
    c.set_input_grad(0, m.normalized_grad(g, xhat, inv));
  }
}

// LpNormalization, y = x / s with s = ||x||_p along the axis:
// dx = (dy - g * sum(dy * y)) / s, where g = ds/dx = y for p = 2 and sign(x) for p = 1.
void lp_normalization(GradContext& c) {
  GradBuilder& b = c.b;
  Value* x = c.input(0);
  const auto rank = static_cast<int64_t>(x->type.shape->size());
  int64_t axis = c.attr_int("axis", -1);
  if (axis < 0) axis += rank;
  const int64_t p = c.attr_int("p", 2);
  if (p != 1 && p != 2) c.fail("attribute 'p' must be 1 or 2");
  Moments m(b, x->type, {axis});
  Value* y = c.output(0);
  Value* s = p == 1 ? m.sum(b.op("Abs", {x}, x->type))
                    : b.op("Sqrt", {m.sum(m.full("Mul", x, x))}, {x->type.dtype, m.kept});
  Value* g = p == 1 ? b.op("Sign", {x}, x->type) : y;
  Value* dy = c.output_grad(0);
  Value* along = m.full("Mul", g, m.sum(m.full("Mul", dy, y)));
  c.set_input_grad(0, m.full("Div", m.full("Sub", dy, along), s));
}

}  // namespace

void register_nn_gradients(GradientRegistry& r) {
  r.add("Conv", conv);
  r.add(ops::OpKey(kAmpcDomain, "Conv"), conv);  // the bf16 Conv autocast substitutes
  r.add("ConvTranspose", conv_transpose);
  r.add(ops::OpKey(kAmpcDomain, "ConvTranspose"), conv_transpose);  // its bf16 form (autocast)
  r.add("MaxPool", [](GradContext& c) { pool(c, true); });
  r.add(ops::OpKey(kAmpcDomain, "MaxPool"), [](GradContext& c) { pool(c, true); });
  r.add("AveragePool", [](GradContext& c) { pool(c, false); });
  r.add("GlobalAveragePool", global_average_pool);
  r.add("GlobalMaxPool", global_max_pool);
  r.add(ops::OpKey(kAmpcDomain, "AveragePool"), [](GradContext& c) { pool(c, false); });
  r.add(ops::OpKey(kAmpcDomain, "GlobalAveragePool"), global_average_pool);
  r.add("BatchNormalization", batch_norm);
  r.add("LayerNormalization", layer_norm);
  r.add("InstanceNormalization", instance_norm);
  r.add("LpNormalization", lp_normalization);
}

}  // namespace ampc::passes::autodiff
