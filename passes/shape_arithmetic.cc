#include "passes/shape_arithmetic.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>

namespace ampc::passes {
namespace {

using ir::Tensor;

// Float results are folded only this small (shape arithmetic, scale factors).
constexpr int64_t kMaxFloatElements = 16;

bool is_integral(DType t) {
  return t == DType::kInt64 || t == DType::kInt32 || t == DType::kBool || t == DType::kInt8 ||
         t == DType::kUInt8 || t == DType::kInt16;
}
bool is_floating(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64;
}

// A constant as numbers: integral dtypes (bool included) as int64, floats as double.
struct Arr {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  std::vector<int64_t> i;
  std::vector<double> f;
  bool floating() const { return is_floating(dtype); }
  size_t size() const { return floating() ? f.size() : i.size(); }
  // Appends element `k` of `x` (of the same kind: floating or integral).
  void push_from(const Arr& x, size_t k) {
    if (floating())
      f.push_back(x.f[k]);
    else
      i.push_back(x.i[k]);
  }
};

std::optional<Arr> read(const Tensor& t) {
  if (!is_integral(t.dtype) && !is_floating(t.dtype)) return std::nullopt;
  Arr a;
  a.dtype = t.dtype;
  a.dims = t.dims;
  const auto n = static_cast<size_t>(t.numel());
  const uint8_t* p = t.bytes.data();
  for (size_t k = 0; k < n; ++k) {
    switch (t.dtype) {
      case DType::kInt64:
        a.i.push_back(ir::load_element<int64_t>(p, k));
        break;
      case DType::kInt32:
        a.i.push_back(ir::load_element<int32_t>(p, k));
        break;
      case DType::kInt16:
        a.i.push_back(ir::load_element<int16_t>(p, k));
        break;
      case DType::kInt8:
        a.i.push_back(static_cast<int8_t>(p[k]));
        break;
      case DType::kUInt8:
        a.i.push_back(p[k]);
        break;
      case DType::kBool:
        a.i.push_back(p[k] != 0);
        break;
      case DType::kFloat32:
        a.f.push_back(ir::load_element<float>(p, k));
        break;
      default:
        a.f.push_back(ir::load_element<double>(p, k));
    }
  }
  return a;
}

// Writes `a` as dtype `to` (converting between integers and floats as Cast does).
Tensor write(const Arr& a, DType to) {
  Tensor t;
  t.dtype = to;
  t.dims = a.dims;
  const size_t n = a.size();
  t.bytes.resize(n * dtype_size(to));
  uint8_t* p = t.bytes.data();
  for (size_t k = 0; k < n; ++k) {
    const double fv = a.floating() ? a.f[k] : static_cast<double>(a.i[k]);
    const int64_t iv = a.floating() ? static_cast<int64_t>(std::trunc(a.f[k])) : a.i[k];
    switch (to) {
      case DType::kInt64:
        ir::store_element(p, k, iv);
        break;
      case DType::kInt32:
        ir::store_element(p, k, static_cast<int32_t>(iv));
        break;
      case DType::kInt16:
        ir::store_element(p, k, static_cast<int16_t>(iv));
        break;
      case DType::kInt8:
      case DType::kUInt8:
        p[k] = static_cast<uint8_t>(iv);
        break;
      case DType::kBool:
        p[k] = a.floating() ? a.f[k] != 0 : a.i[k] != 0;
        break;
      case DType::kFloat32:
        ir::store_element(p, k, static_cast<float>(fv));
        break;
      default:
        ir::store_element(p, k, fv);
    }
  }
  return t;
}

std::optional<Arr> input(const ir::Node& n, size_t k) {
  if (k >= n.inputs.size() || !n.inputs[k] || !n.inputs[k]->initializer) return std::nullopt;
  return read(*n.inputs[k]->initializer);
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::optional<std::vector<int64_t>> broadcast(const std::vector<std::vector<int64_t>>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t k = 0; k < s.size(); ++k) {
      int64_t& o = out[rank - s.size() + k];
      if (s[k] == o || s[k] == 1) continue;
      if (o != 1) return std::nullopt;
      o = s[k];
    }
  }
  return out;
}

// The element of an input of shape `in` that output element `linear` (shape `out`) reads.
size_t source_index(size_t linear, const std::vector<int64_t>& out,
                    const std::vector<int64_t>& in) {
  size_t index = 0, stride = 1;
  auto rem = static_cast<int64_t>(linear);
  for (size_t k = out.size(); k-- > 0;) {
    const int64_t coord = rem % out[k];
    rem /= out[k];
    const size_t ik = k + in.size();
    if (ik < out.size()) continue;
    const int64_t d = in[ik - out.size()];
    if (d != 1) index += static_cast<size_t>(coord) * stride;
    stride *= static_cast<size_t>(d);
  }
  return index;
}

// The ops that mean the same on doubles and int64s (comparisons give 0 or 1); nullopt for
// the others, which `elementwise` computes per kind.
template <typename T>
std::optional<T> same_on_floats_and_ints(const std::string& op, T x, T y) {
  if (op == "Add") return x + y;
  if (op == "Sub") return x - y;
  if (op == "Mul") return x * y;
  if (op == "Min") return std::min(x, y);
  if (op == "Max") return std::max(x, y);
  if (op == "Neg") return -x;
  if (op == "Identity") return x;
  if (op == "Equal") return x == y;
  if (op == "Less") return x < y;
  if (op == "Greater") return x > y;
  if (op == "LessOrEqual") return x <= y;
  if (op == "GreaterOrEqual") return x >= y;
  return std::nullopt;
}

std::optional<Tensor> elementwise(const ir::Node& n) {
  static const std::set<std::string> kUnary = {"Neg",  "Abs",  "Not",     "Floor",
                                               "Ceil", "Sqrt", "Identity"};
  static const std::set<std::string> kBinary = {"Add",  "Sub",     "Mul",         "Div",
                                                "Mod",  "Min",     "Max",         "Equal",
                                                "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                                "And",  "Or"};
  const std::string& op = n.op_type;
  const bool unary = kUnary.count(op) > 0;
  if (!unary && !kBinary.count(op)) return std::nullopt;
  if (unary ? n.inputs.size() != 1 : n.inputs.size() != 2) return std::nullopt;
  auto a = input(n, 0);
  auto b = unary ? a : input(n, 1);
  if (!a || !b || a->dtype != b->dtype) return std::nullopt;
  auto dims = broadcast({a->dims, b->dims});
  if (!dims) return std::nullopt;
  Arr out;
  out.dims = *dims;
  const bool compare = op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" ||
                       op == "GreaterOrEqual";
  out.dtype = compare ? DType::kBool : a->dtype;
  const auto count = static_cast<size_t>(numel(*dims));
  if (a->floating() && (count > kMaxFloatElements || op == "Mod")) return std::nullopt;
  if (!a->floating() && op == "Sqrt") return std::nullopt;
  for (size_t k = 0; k < count; ++k) {
    const size_t ia = source_index(k, *dims, a->dims), ib = source_index(k, *dims, b->dims);
    if (a->floating()) {
      const double x = a->f[ia], y = b->f[ib];
      double r;
      if (auto shared = same_on_floats_and_ints(op, x, y))
        r = *shared;
      else if (op == "Div")
        r = x / y;
      else if (op == "Abs")
        r = std::fabs(x);
      else if (op == "Floor")
        r = std::floor(x);
      else if (op == "Ceil")
        r = std::ceil(x);
      else if (op == "Sqrt")
        r = std::sqrt(x);
      else
        return std::nullopt;
      // One rounding to float32 per op, as the backend computes it.
      if (a->dtype == DType::kFloat32 && !compare) r = static_cast<float>(r);
      if (compare)
        out.i.push_back(static_cast<int64_t>(r));
      else
        out.f.push_back(r);
      continue;
    }
    const int64_t x = a->i[ia], y = b->i[ib];
    int64_t r;
    if (auto shared = same_on_floats_and_ints(op, x, y))
      r = *shared;
    else if (op == "Div") {
      if (y == 0) return std::nullopt;
      r = x / y;  // ONNX integer Div truncates, as C++ does
    } else if (op == "Mod") {
      if (y == 0) return std::nullopt;
      const auto* fmod = n.attr("fmod");
      r = x % y;
      if (!(fmod && fmod->i) && r != 0 && ((r < 0) != (y < 0))) r += y;  // sign of divisor
    } else if (op == "Abs")
      r = x < 0 ? -x : x;
    else if (op == "Floor" || op == "Ceil")
      r = x;
    else if (op == "Not")
      r = !x;
    else if (op == "And")
      r = x && y;
    else if (op == "Or")
      r = x || y;
    else
      return std::nullopt;
    out.i.push_back(r);
  }
  return write(out, out.dtype);
}

std::optional<Tensor> where(const ir::Node& n) {
  auto c = input(n, 0), a = input(n, 1), b = input(n, 2);
  if (!c || !a || !b || a->dtype != b->dtype) return std::nullopt;
  auto dims = broadcast({c->dims, a->dims, b->dims});
  if (!dims) return std::nullopt;
  const auto count = static_cast<size_t>(numel(*dims));
  if (a->floating() && count > kMaxFloatElements) return std::nullopt;
  Arr out;
  out.dtype = a->dtype;
  out.dims = *dims;
  for (size_t k = 0; k < count; ++k) {
    const bool pick = c->i[source_index(k, *dims, c->dims)] != 0;
    const Arr& src = pick ? *a : *b;
    const size_t s = source_index(k, *dims, src.dims);
    if (out.floating())
      out.f.push_back(src.f[s]);
    else
      out.i.push_back(src.i[s]);
  }
  return write(out, out.dtype);
}

std::optional<Tensor> expand(const ir::Node& n) {
  auto x = input(n, 0), shape = input(n, 1);
  if (!x || !shape || shape->floating()) return std::nullopt;
  auto dims = broadcast({x->dims, shape->i});
  if (!dims) return std::nullopt;
  Arr out;
  out.dtype = x->dtype;
  out.dims = *dims;
  const auto count = static_cast<size_t>(numel(*dims));
  if (x->floating() && count > kMaxFloatElements) return std::nullopt;
  for (size_t k = 0; k < count; ++k) {
    const size_t s = source_index(k, *dims, x->dims);
    out.push_from(*x, s);
  }
  return write(out, out.dtype);
}

std::optional<Tensor> constant_of_shape(const ir::Node& n) {
  auto shape = input(n, 0);
  if (!shape || shape->floating()) return std::nullopt;
  Arr value;
  value.dtype = DType::kFloat32;
  value.f = {0.0};
  if (const auto* a = n.attr("value")) {
    auto v = read(a->t);
    if (!v || v->size() != 1) return std::nullopt;
    value = *v;
  }
  for (int64_t d : shape->i) {
    if (d < 0) return std::nullopt;
  }
  const int64_t count = numel(shape->i);
  if (value.floating() && count > kMaxFloatElements) return std::nullopt;
  if (count > (int64_t{1} << 16)) return std::nullopt;
  Arr out;
  out.dtype = value.dtype;
  out.dims = shape->i;
  if (out.floating())
    out.f.assign(static_cast<size_t>(count), value.f[0]);
  else
    out.i.assign(static_cast<size_t>(count), value.i[0]);
  return write(out, out.dtype);
}

std::optional<Tensor> range(const ir::Node& n) {
  auto start = input(n, 0), limit = input(n, 1), delta = input(n, 2);
  if (!start || !limit || !delta || start->size() != 1 || limit->size() != 1 ||
      delta->size() != 1 || start->floating())
    return std::nullopt;
  const int64_t s = start->i[0], l = limit->i[0], d = delta->i[0];
  if (d == 0) return std::nullopt;
  const int64_t count = std::max<int64_t>(0, (l - s + d + (d > 0 ? -1 : 1)) / d);
  if (count > (int64_t{1} << 16)) return std::nullopt;
  Arr out;
  out.dtype = start->dtype;
  out.dims = {count};
  for (int64_t k = 0; k < count; ++k) out.i.push_back(s + k * d);
  return write(out, out.dtype);
}

std::optional<Tensor> slice(const ir::Node& n) {
  auto x = input(n, 0), starts = input(n, 1), ends = input(n, 2);
  if (!x || !starts || !ends || starts->floating() || ends->floating()) return std::nullopt;
  if (x->floating() && x->size() > static_cast<size_t>(kMaxFloatElements)) return std::nullopt;
  const auto rank = static_cast<int64_t>(x->dims.size());
  std::vector<int64_t> axes(starts->i.size()), steps(starts->i.size(), 1);
  for (size_t k = 0; k < axes.size(); ++k) axes[k] = static_cast<int64_t>(k);
  if (n.inputs.size() > 3 && n.inputs[3]) {
    auto a = input(n, 3);
    if (!a) return std::nullopt;
    axes = a->i;
  }
  if (n.inputs.size() > 4 && n.inputs[4]) {
    auto s = input(n, 4);
    if (!s) return std::nullopt;
    steps = s->i;
  }
  if (axes.size() != starts->i.size() || ends->i.size() != axes.size() ||
      steps.size() != axes.size())
    return std::nullopt;
  std::vector<int64_t> begin(static_cast<size_t>(rank), 0), step(static_cast<size_t>(rank), 1),
      out_dims = x->dims;
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (a < 0 || a >= rank || steps[k] == 0) return std::nullopt;
    const int64_t dim = x->dims[a];
    const int64_t st = steps[k];
    int64_t b = starts->i[k], e = ends->i[k];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (st > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      b = std::clamp<int64_t>(b, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    const int64_t len = st > 0 ? (e - b + st - 1) / st : (b - e + (-st) - 1) / (-st);
    begin[a] = b;
    step[a] = st;
    out_dims[a] = std::max<int64_t>(0, len);
  }
  Arr out;
  out.dtype = x->dtype;
  out.dims = out_dims;
  const auto count = static_cast<size_t>(numel(out_dims));
  for (size_t k = 0; k < count; ++k) {
    auto rem = static_cast<int64_t>(k);
    size_t src = 0, stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t coord = rem % out_dims[d];
      rem /= out_dims[d];
      src += static_cast<size_t>(begin[d] + coord * step[d]) * stride;
      stride *= static_cast<size_t>(x->dims[d]);
    }
    out.push_from(*x, src);
  }
  return write(out, out.dtype);
}

std::optional<Tensor> reshape(const ir::Node& n) {
  auto x = input(n, 0), shape = input(n, 1);
  if (!x || !shape || shape->floating()) return std::nullopt;
  if (x->floating() && x->size() > static_cast<size_t>(kMaxFloatElements)) return std::nullopt;
  const auto* allowzero = n.attr("allowzero");
  std::vector<int64_t> dims = shape->i;
  int64_t known = 1, infer = -1;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 0 && !(allowzero && allowzero->i)) {
      if (k >= x->dims.size()) return std::nullopt;
      dims[k] = x->dims[k];
    }
    if (dims[k] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = static_cast<int64_t>(k);
    } else {
      known *= dims[k];
    }
  }
  const auto total = static_cast<int64_t>(x->size());
  if (infer >= 0) {
    if (known == 0 || total % known) return std::nullopt;
    dims[static_cast<size_t>(infer)] = total / known;
  }
  if (numel(dims) != total) return std::nullopt;
  Arr out = *x;
  out.dims = dims;
  return write(out, out.dtype);
}

std::optional<Tensor> cast(const ir::Node& n) {
  auto x = input(n, 0);
  const auto* to = n.attr("to");
  if (!x || !to) return std::nullopt;
  const auto dtype = static_cast<DType>(to->i);
  if (!is_integral(dtype) && !is_floating(dtype)) return std::nullopt;
  if ((is_floating(dtype) || x->floating()) && x->size() > static_cast<size_t>(kMaxFloatElements))
    return std::nullopt;
  Arr a = *x;
  if (dtype == DType::kFloat32 && a.floating()) {
    for (double& v : a.f) v = static_cast<float>(v);
  }
  return write(a, dtype);
}

std::optional<std::vector<Tensor>> split(const ir::Node& n) {
  auto x = input(n, 0);
  if (!x || x->floating()) return std::nullopt;
  const auto rank = static_cast<int64_t>(x->dims.size());
  int64_t axis = n.attr("axis") ? n.attr("axis")->i : 0;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  std::vector<int64_t> sizes;
  if (n.inputs.size() > 1 && n.inputs[1]) {
    auto s = input(n, 1);
    if (!s) return std::nullopt;
    sizes = s->i;
  } else if (const auto* a = n.attr("split")) {
    sizes = a->ints;
  } else {
    const auto parts = static_cast<int64_t>(n.outputs.size());
    const int64_t each = (x->dims[axis] + parts - 1) / parts;
    for (int64_t k = 0, left = x->dims[axis]; k < parts; ++k, left -= each)
      sizes.push_back(std::min(each, left));
  }
  if (sizes.size() != n.outputs.size()) return std::nullopt;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x->dims[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x->dims[d];
  std::vector<Tensor> outs;
  int64_t offset = 0;
  for (int64_t size : sizes) {
    Arr o;
    o.dtype = x->dtype;
    o.dims = x->dims;
    o.dims[axis] = size;
    for (int64_t b = 0; b < outer; ++b)
      for (int64_t k = 0; k < size * inner; ++k)
        o.i.push_back(x->i[static_cast<size_t>((b * x->dims[axis] + offset) * inner + k)]);
    offset += size;
    outs.push_back(write(o, o.dtype));
  }
  if (offset != x->dims[axis]) return std::nullopt;
  return outs;
}

std::optional<Tensor> tile(const ir::Node& n) {
  auto x = input(n, 0), reps = input(n, 1);
  if (!x || !reps || x->floating() || reps->i.size() != x->dims.size()) return std::nullopt;
  Arr out;
  out.dtype = x->dtype;
  for (size_t d = 0; d < x->dims.size(); ++d) out.dims.push_back(x->dims[d] * reps->i[d]);
  const auto count = static_cast<size_t>(numel(out.dims));
  if (count > (size_t{1} << 16)) return std::nullopt;
  for (size_t k = 0; k < count; ++k) {
    auto rem = static_cast<int64_t>(k);
    size_t src = 0, stride = 1;
    for (size_t d = out.dims.size(); d-- > 0;) {
      const int64_t coord = rem % out.dims[d];
      rem /= out.dims[d];
      src += static_cast<size_t>(coord % x->dims[d]) * stride;
      stride *= static_cast<size_t>(x->dims[d]);
    }
    out.i.push_back(x->i[src]);
  }
  return write(out, out.dtype);
}

// Concat of small float constants (torch writes Resize's scales as Concat([1, 1], [2, 2]));
// integer Concat is constant_folding's.
std::optional<Tensor> concat(const ir::Node& n) {
  const auto* axis_attr = n.attr("axis");
  if (!axis_attr || n.inputs.empty()) return std::nullopt;
  std::vector<Arr> parts;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    auto a = input(n, k);
    if (!a || a->dtype != input(n, 0)->dtype || a->dims.size() != 1) return std::nullopt;
    parts.push_back(std::move(*a));
  }
  Arr out;
  out.dtype = parts[0].dtype;
  for (const Arr& a : parts) {
    out.f.insert(out.f.end(), a.f.begin(), a.f.end());
    out.i.insert(out.i.end(), a.i.begin(), a.i.end());
  }
  out.dims = {static_cast<int64_t>(out.size())};
  if (out.floating() && out.size() > static_cast<size_t>(kMaxFloatElements)) return std::nullopt;
  return write(out, out.dtype);
}

// torch's F.pad writes its pads as [[begin, end], ...] reversed and transposed.
std::optional<Tensor> transpose(const ir::Node& n) {
  auto x = input(n, 0);
  if (!x || (x->floating() && x->size() > static_cast<size_t>(kMaxFloatElements)))
    return std::nullopt;
  const size_t rank = x->dims.size();
  std::vector<int64_t> perm(rank);
  for (size_t k = 0; k < rank; ++k) perm[k] = static_cast<int64_t>(rank - 1 - k);
  if (const auto* a = n.attr("perm")) perm = a->ints;
  if (perm.size() != rank) return std::nullopt;
  Arr out;
  out.dtype = x->dtype;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank)) return std::nullopt;
    out.dims.push_back(x->dims[static_cast<size_t>(p)]);
  }
  std::vector<int64_t> in_strides(rank, 1);
  for (size_t k = rank; k-- > 1;) in_strides[k - 1] = in_strides[k] * x->dims[k];
  const auto count = static_cast<size_t>(numel(out.dims));
  for (size_t k = 0; k < count; ++k) {
    auto rem = static_cast<int64_t>(k);
    int64_t src = 0;
    for (size_t d = rank; d-- > 0;) {
      const int64_t coord = rem % out.dims[d];
      rem /= out.dims[d];
      src += coord * in_strides[static_cast<size_t>(perm[d])];
    }
    out.push_from(*x, static_cast<size_t>(src));
  }
  return write(out, out.dtype);
}

std::optional<Tensor> single(const ir::Node& n) {
  if (n.op_type == "Concat") return concat(n);
  if (n.op_type == "Transpose") return transpose(n);
  const std::string& op = n.op_type;
  if (op == "Where") return where(n);
  if (op == "Expand") return expand(n);
  if (op == "ConstantOfShape") return constant_of_shape(n);
  if (op == "Range") return range(n);
  if (op == "Slice") return slice(n);
  if (op == "Reshape") return reshape(n);
  if (op == "Cast") return cast(n);
  if (op == "Tile") return tile(n);
  return elementwise(n);
}

}  // namespace

std::optional<std::vector<Tensor>> evaluate_shape_arithmetic(const ir::Node& n) {
  if (!n.domain.empty()) return std::nullopt;
  for (const ir::Value* v : n.outputs) {
    if (!v) return std::nullopt;
  }
  for (const ir::Value* v : n.inputs) {
    if (!v) continue;
    if (!v->initializer) return std::nullopt;
    // A model's float initializer is a parameter: never bake it into a constant.
    if (v->from_model && is_floating(v->type.dtype)) return std::nullopt;
  }
  if (n.op_type == "Split") return split(n);
  if (n.outputs.size() != 1) return std::nullopt;
  auto t = single(n);
  if (!t) return std::nullopt;
  return std::vector<Tensor>{std::move(*t)};
}

}  // namespace ampc::passes
