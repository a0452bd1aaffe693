#include "passes/lower_resize.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace ampc::passes {
namespace {

std::string attr_string(const ir::Node& n, const std::string& name, const std::string& fallback) {
  const ir::Attribute* a = n.attr(name);
  return a ? a->s : fallback;
}

// The scales input as numbers (empty when absent or not a constant).
std::vector<double> constant_scales(const ir::Node& n) {
  if (n.inputs.size() < 3 || !n.inputs[2] || !n.inputs[2]->initializer) return {};
  const ir::Tensor& t = *n.inputs[2]->initializer;
  std::vector<double> out;
  for (int64_t k = 0; k < t.numel(); ++k) {
    const auto i = static_cast<size_t>(k);
    if (t.dtype == DType::kFloat32)
      out.push_back(ir::load_element<float>(t.bytes.data(), i));
    else if (t.dtype == DType::kFloat64)
      out.push_back(ir::load_element<double>(t.bytes.data(), i));
  }
  return out;
}

// The input coordinate output index `i` maps to (ONNX Resize's coordinate transformations).
// `length`: the resized length align_corners divides by: ONNX's is in x scale, unrounded when
// the node gives scales; PyTorch's the output's length (lengths_of_pytorch).
double source_coordinate(const std::string& mode, int64_t i, int64_t in, int64_t out, double scale,
                         double length, const ir::Node& n) {
  const double x = static_cast<double>(i);
  if (mode == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (mode == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (mode == "asymmetric") return x / scale;
  if (mode == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (mode == "align_corners")
    return out > 1 && length > 1 ? x * static_cast<double>(in - 1) / (length - 1) : 0.0;
  if (mode == "half_pixel_symmetric") {
    const double adj = static_cast<double>(out) / scale;
    const double offset = static_cast<double>(in) / 2 * (1 - adj / static_cast<double>(in));
    return offset + (x + 0.5) / scale - 0.5;
  }
  throw Error(
      "node " + n.label() + ": coordinate_transformation_mode '" + mode +
      "' is not supported (half_pixel, pytorch_half_pixel, half_pixel_symmetric, asymmetric, "
      "align_corners, tf_half_pixel_for_nn are)");
}

int64_t nearest_index(const std::string& mode, double x) {
  if (mode == "floor") return static_cast<int64_t>(std::floor(x));
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  const double f = std::floor(x);
  const bool half = x - f == 0.5;
  if (half) return static_cast<int64_t>(mode == "round_prefer_ceil" ? f + 1 : f);
  return static_cast<int64_t>(std::round(x));
}

// Keys' cubic convolution kernel at distance d with coefficient a (ONNX's cubic_coeff_a,
// -0.75 as PyTorch's bicubic and OpenCV's).
double cubic_kernel(double d, double a) {
  d = std::abs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

// The four taps of cubic interpolation at x: floor(x) - 1 .. floor(x) + 2, weighted by the
// kernel at their distances. Taps outside the input read its edge (ONNX's and PyTorch's
// bicubic), or with exclude_outside get weight 0 and the others are scaled to sum to 1.
void cubic_row(double x, int64_t in, double a, bool exclude_outside, double* row) {
  const double x0 = std::floor(x);
  double taps[4], total = 0;
  for (int k = 0; k < 4; ++k) {
    const double at = x0 - 1 + k;
    const bool outside = at < 0 || at > static_cast<double>(in - 1);
    taps[k] = exclude_outside && outside ? 0.0 : cubic_kernel(x - at, a);
    total += taps[k];
  }
  for (int k = 0; k < 4; ++k) {
    const auto at = std::clamp<int64_t>(static_cast<int64_t>(x0) - 1 + k, 0, in - 1);
    row[at] += exclude_outside ? taps[k] / total : taps[k];
  }
}

// Row-major [out, in] weights of one resized axis.
std::vector<double> weights(const ir::Node& n, int64_t in, int64_t out, double scale,
                            double length) {
  const std::string mode = attr_string(n, "mode", "nearest");
  const std::string transform = attr_string(n, "coordinate_transformation_mode", "half_pixel");
  const std::string nearest_mode = attr_string(n, "nearest_mode", "round_prefer_floor");
  const ir::Attribute* coeff = n.attr("cubic_coeff_a");
  const ir::Attribute* exclude = n.attr("exclude_outside");
  std::vector<double> w(static_cast<size_t>(out * in), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    double x = source_coordinate(transform, i, in, out, scale, length, n);
    double* row = w.data() + i * in;
    if (mode == "nearest") {
      row[std::clamp<int64_t>(nearest_index(nearest_mode, x), 0, in - 1)] = 1.0;
      continue;
    }
    if (mode == "cubic") {
      cubic_row(x, in, coeff ? coeff->f : -0.75, exclude && exclude->i != 0, row);
      continue;
    }
    x = std::clamp(x, 0.0, static_cast<double>(in - 1));
    const auto x0 = static_cast<int64_t>(std::floor(x));
    const int64_t x1 = std::min(x0 + 1, in - 1);
    const double frac = x - static_cast<double>(x0);
    row[x0] += 1.0 - frac;
    row[x1] += frac;
  }
  return w;
}

ir::Value* matrix(ir::Graph& g, const std::string& name, DType dtype, int64_t rows, int64_t cols,
                  const std::vector<double>& values) {
  ir::Tensor t = ir::tensor_of<float>(dtype, DType::kFloat64, {rows, cols}, values);
  ir::Value* v = g.add_value(name, {dtype, t.dims});
  t.name = v->name;
  v->initializer = std::make_unique<ir::Tensor>(std::move(t));
  g.initializers.push_back(v);
  return v;
}

ir::Value* ints_constant(ir::Graph& g, const std::string& name, const std::vector<int64_t>& v) {
  ir::Tensor t =
      ir::tensor_of<int32_t>(DType::kInt64, DType::kInt64, {static_cast<int64_t>(v.size())}, v);
  ir::Value* c = g.add_value(name, {DType::kInt64, t.dims});
  t.name = c->name;
  c->initializer = std::make_unique<ir::Tensor>(std::move(t));
  g.initializers.push_back(c);
  return c;
}

// next = A [out, in] x cur along axis `a`, which is not one of the last two: cur seen as
// [prod(axes before a), in, prod(axes after a)], so the product is the second-to-last form's
// MatMul, and its result reshaped to next's shape.
void next_to_last_form(ir::Graph& g, ir::Value* cur, ir::Value* next, ir::Value* a_matrix, size_t a,
                       const std::string& base) {
  const auto& s = *cur->type.shape;
  const auto product = [&](size_t from, size_t to) {
    int64_t p = 1;
    for (size_t k = from; k < to; ++k) p *= s[k];
    return p;
  };
  const std::string tag = std::to_string(a);
  const int64_t before = product(0, a), after = product(a + 1, s.size());
  const int64_t out = a_matrix->type.shape->at(0);
  ir::Value* flat = g.add_value(base + "flat" + tag, {cur->type.dtype, {{before, s[a], after}}});
  g.add_node("Reshape", {cur, ints_constant(g, base + "flat_shape" + tag, {before, s[a], after})},
             {flat}, base + "flatten" + tag);
  ir::Value* product_value =
      g.add_value(base + "resized" + tag, {cur->type.dtype, {{before, out, after}}});
  g.add_node("MatMul", {a_matrix, flat}, {product_value}, base + "matmul" + tag);
  g.add_node("Reshape", {product_value, ints_constant(g, base + "shape" + tag, *next->type.shape)},
             {next}, base + "unflatten" + tag);
}

void lower(ir::Graph& g, size_t index, bool lengths_of_pytorch) {
  ir::Node* n = g.nodes[index].get();
  ir::Value* x = n->inputs[0];
  ir::Value* y = n->outputs[0];
  if (!x->type.is_static() || !y->type.is_static()) {
    throw Error("node " + n->label() + ": Resize needs static input and output shapes (" +
                x->type.str() + " -> " + y->type.str() + ")");
  }
  const std::string mode = attr_string(*n, "mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic") {
    throw Error("node " + n->label() + ": Resize mode '" + mode +
                "' is not supported (nearest, linear and cubic are)");
  }
  if (const auto* a = n->attr("antialias"); a && a->i) {
    throw Error("node " + n->label() + ": Resize with antialias is not supported");
  }
  if (x->type.dtype != DType::kFloat32 && x->type.dtype != DType::kFloat64) {
    throw Error("node " + n->label() + ": Resize of " + x->type.str() +
                " is not supported (float32 and float64 are)");
  }
  const auto& in = *x->type.shape;
  const auto& out = *y->type.shape;
  const size_t rank = in.size();
  const std::vector<double> scales = constant_scales(*n);
  const std::string base = (n->name.empty() ? "resize" : n->name) + "/";
  std::vector<std::pair<size_t, int64_t>> axes;  // resized axes
  for (size_t a = 0; a < rank; ++a) {
    if (in[a] == out[a] && (scales.size() != rank || scales[a] == 1.0)) continue;
    axes.emplace_back(a, out[a]);
  }
  const size_t first_new = g.nodes.size();
  ir::Value* cur = x;
  std::vector<int64_t> shape = in;
  for (size_t k = 0; k < axes.size(); ++k) {
    const auto [a, o] = axes[k];
    const double scale =
        scales.size() == rank ? scales[a] : static_cast<double>(o) / static_cast<double>(in[a]);
    // With scales, ONNX's align_corners divides by the unrounded length; PyTorch's, which
    // exports F.interpolate(scale_factor=s, align_corners=True) with scales, by the rounded
    // one (they differ where in x s is not whole: downsampling by 0.6).
    const bool unrounded = scales.size() == rank && !lengths_of_pytorch;
    const double length =
        unrounded ? static_cast<double>(in[a]) * scales[a] : static_cast<double>(o);
    const std::vector<double> w = weights(*n, in[a], o, scale, length);
    shape[a] = o;
    ir::Value* next = k + 1 == axes.size()
                          ? y
                          : g.add_value(base + "axis" + std::to_string(a), {x->type.dtype, shape});
    if (a + 1 == rank) {  // last axis: cur [.., in] x A^T [in, out]
      std::vector<double> wt(w.size());
      for (int64_t i = 0; i < o; ++i)
        for (int64_t j = 0; j < in[a]; ++j) wt[j * o + i] = w[i * in[a] + j];
      ir::Value* m = matrix(g, base + "weights" + std::to_string(a), x->type.dtype, in[a], o, wt);
      g.add_node("MatMul", {cur, m}, {next}, base + "matmul" + std::to_string(a));
    } else if (a + 2 == rank) {  // second to last: A [out, in] x cur [.., in, W]
      ir::Value* m = matrix(g, base + "weights" + std::to_string(a), x->type.dtype, o, in[a], w);
      g.add_node("MatMul", {m, cur}, {next}, base + "matmul" + std::to_string(a));
    } else {  // an earlier axis (a volume's depth): A x cur as [before, in, after]
      ir::Value* m = matrix(g, base + "weights" + std::to_string(a), x->type.dtype, o, in[a], w);
      next_to_last_form(g, cur, next, m, a, base);
    }
    cur = next;
  }
  if (axes.empty()) g.add_node("Identity", {x}, {y}, base + "identity");
  // The new nodes take the Resize's place in the order; the MatMuls that replace it write
  // its output value.
  g.move_tail_before(first_new, n);
  g.detach_node(n);
}

}  // namespace

int lower_resize(ir::Model& model) {
  ir::Graph& g = *model.graph;
  int lowered = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i]->op_type != "Resize" || !g.nodes[i]->domain.empty()) continue;
    const std::string transform =
        attr_string(*g.nodes[i], "coordinate_transformation_mode", "half_pixel");
    if (transform == "tf_crop_and_resize") {
      throw Error("node " + g.nodes[i]->label() +
                  ": Resize with tf_crop_and_resize is not supported");
    }
    lower(g, i, model.producer_name == "pytorch");
    ++lowered;
  }
  return lowered;
}

}  // namespace ampc::passes
