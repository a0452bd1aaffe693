// Indexing operators: Gather, GatherElements, GatherND, ScatterElements (and the deprecated
// Scatter), ScatterND, OneHot, Compress. Indices may be negative (counted from the end);
// out-of-range indices fail.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "runtime/cpu/ops/nn_util.h"
#include "runtime/cpu/ops/tensor_common.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu {
namespace {

// Index i of an axis of size dim, negative counted from the end; fails outside [-dim, dim).
int64_t fix_index(const OpContext& ctx, int64_t i, int64_t dim) {
  if (i < -dim || i >= dim) {
    ctx.fail("index " + std::to_string(i) + " is out of range for an axis of size " +
             std::to_string(dim));
  }
  return i < 0 ? i + dim : i;
}

int64_t product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i) p *= s[i];
  return p;
}

void gather_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& indices = ctx.in(1);
  const int64_t axis =
      normalize_axis(ctx, plan::params<plan::AxisParams>(ctx.step()).axis(), x.rank());
  std::vector<int64_t> idx = int_values(ctx, 1);
  for (int64_t& i : idx) i = fix_index(ctx, i, x.dim(axis));
  Shape shape(x.shape().begin(), x.shape().begin() + axis);
  shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
  shape.insert(shape.end(), x.shape().begin() + axis + 1, x.shape().end());
  Tensor& y = ctx.output(0, x.dtype(), shape);
  const size_t a = static_cast<size_t>(axis);
  visit_storage(x.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    kc::gather_axis<U>(storage<U>(x), product(x.shape(), 0, a), x.dim(axis),
                       product(x.shape(), a + 1, x.shape().size()), idx.data(),
                       static_cast<int64_t>(idx.size()), storage<U>(y));
  });
}

// For each element of `indices` (flat k), the flat offset into `data` of the element whose
// coordinate along `axis` is replaced by indices[k].
std::vector<int64_t> element_offsets(const OpContext& ctx, const Tensor& data,
                                     const Tensor& indices, int64_t axis) {
  if (indices.rank() != data.rank()) ctx.fail("indices must have the rank of the data");
  const std::vector<int64_t> idx = int_values(ctx, 1);
  const Shape strides = kc::contiguous_strides(data.shape());
  std::vector<int64_t> out(idx.size());
  std::vector<int64_t> pos(static_cast<size_t>(indices.rank()), 0);
  for (size_t k = 0; k < idx.size(); ++k) {
    int64_t off = 0;
    for (int64_t d = 0; d < indices.rank(); ++d) {
      const int64_t i = d == axis ? fix_index(ctx, idx[k], data.dim(d)) : pos[d];
      if (d != axis && i >= data.dim(d)) ctx.fail("indices shape exceeds the data shape");
      off += i * strides[d];
    }
    out[k] = off;
    for (int64_t d = indices.rank(); d-- > 0;) {
      if (++pos[d] < indices.dim(d)) break;
      pos[d] = 0;
    }
  }
  return out;
}

void gather_elements_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& indices = ctx.in(1);
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  const auto offsets = element_offsets(ctx, x, indices, axis);
  Tensor& y = ctx.output(0, x.dtype(), indices.shape());
  visit_storage(x.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U* src = storage<U>(x);
    U* dst = storage<U>(y);
    for (size_t k = 0; k < offsets.size(); ++k) dst[k] = src[offsets[k]];
  });
}

// Combines an update into a destination element: reduction none / add / mul / max / min.
template <typename T>
void apply_update(T& dst, const T& src, int reduction) {
  if constexpr (std::is_same_v<T, std::string>) {
    dst = src;
  } else {
    if (reduction == 0) {
      dst = src;
      return;
    }
    const auto a = kc::load(dst), b = kc::load(src);
    switch (reduction) {
      case 1:
        dst = kc::store<T>(a + b);
        break;
      case 2:
        dst = kc::store<T>(a * b);
        break;
      case 3:
        dst = kc::store<T>(std::max(a, b));
        break;
      default:
        dst = kc::store<T>(std::min(a, b));
        break;
    }
  }
}

// 0 none, 1 add, 2 mul, 3 max, 4 min: ScatterParams.Reduction's values.
int reduction_of(const OpContext& ctx) {
  const plan::ScatterParams::Reduction r =
      plan::params<plan::ScatterParams>(ctx.step()).reduction();
  if (r != plan::ScatterParams::NONE &&
      (ctx.in(0).dtype() == DType::kString || ctx.in(0).dtype() == DType::kBool)) {
    std::string name = plan::ScatterParams::Reduction_Name(r);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    ctx.fail("reduction '" + name + "' is not supported for element type " +
             std::string(dtype_name(ctx.in(0).dtype())));
  }
  return static_cast<int>(r);
}

// Calls f(Tag<T>) with the element type of `t` (numbers, bool, std::string).
template <typename F>
void visit_elements(const OpContext& ctx, int input, F&& f) {
  if (ctx.in(input).dtype() == DType::kString) return f(kc::Tag<std::string>{});
  if (!kc::visit_dtype<kc::kAllTypes>(ctx.in(input).dtype(), f)) ctx.unsupported_dtype(input);
}

template <typename T>
T* elements(Tensor& t) {
  if constexpr (std::is_same_v<T, std::string>) {
    return t.strings().data();
  } else {
    return t.data<T>();
  }
}
template <typename T>
const T* elements(const Tensor& t) {
  if constexpr (std::is_same_v<T, std::string>) {
    return t.strings().data();
  } else {
    return t.data<T>();
  }
}

void scatter_elements_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& indices = ctx.in(1);
  const Tensor& updates = ctx.in(2);
  if (updates.shape() != indices.shape()) ctx.fail("updates must have the shape of indices");
  if (updates.dtype() != x.dtype()) ctx.fail("updates must have the element type of data");
  const int64_t axis =
      normalize_axis(ctx, plan::params<plan::ScatterParams>(ctx.step()).axis(), x.rank());
  const int reduction = reduction_of(ctx);
  const auto offsets = element_offsets(ctx, x, indices, axis);
  Tensor& y = ctx.output_copy_of_input(0, 0);
  visit_elements(ctx, 0, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* u = elements<T>(updates);
    T* dst = elements<T>(y);
    for (size_t k = 0; k < offsets.size(); ++k) apply_update(dst[offsets[k]], u[k], reduction);
  });
}

// GatherND / ScatterND addressing: for each index tuple (flat t), the offset of the addressed
// slice in the data, and the slice size.
struct NdIndex {
  std::vector<int64_t> offsets;
  int64_t slice = 1;
};

NdIndex nd_index(const OpContext& ctx, const Tensor& data, const Tensor& indices,
                 int64_t batch_dims) {
  if (indices.rank() < 1) ctx.fail("indices must have rank >= 1");
  const int64_t k = indices.dim(indices.rank() - 1);
  const int64_t b = batch_dims;
  if (b < 0 || b >= indices.rank() || b + k > data.rank())
    ctx.fail("indices do not fit the data rank");
  for (int64_t d = 0; d < b; ++d) {
    if (indices.dim(d) != data.dim(d)) ctx.fail("batch dimensions of data and indices differ");
  }
  const std::vector<int64_t> idx = int_values(ctx, 1);
  const Shape strides = kc::contiguous_strides(data.shape());
  NdIndex r;
  r.slice = product(data.shape(), static_cast<size_t>(b + k), data.shape().size());
  const int64_t batch_size = product(data.shape(), static_cast<size_t>(b), data.shape().size());
  const int64_t tuples = k ? static_cast<int64_t>(idx.size()) / k
                           : product(indices.shape(), 0, indices.shape().size() - 1);
  const int64_t per_batch =
      tuples / std::max<int64_t>(1, product(indices.shape(), 0, static_cast<size_t>(b)));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = (per_batch ? t / per_batch : 0) * batch_size;
    for (int64_t j = 0; j < k; ++j)
      off += fix_index(ctx, idx[t * k + j], data.dim(b + j)) * strides[b + j];
    r.offsets.push_back(off);
  }
  return r;
}

void gather_nd_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& indices = ctx.in(1);
  const int64_t b = ctx.attr_int("batch_dims", 0);
  const NdIndex nd = nd_index(ctx, x, indices, b);
  Shape shape(indices.shape().begin(), indices.shape().end() - 1);
  shape.insert(shape.end(), x.shape().begin() + b + indices.dim(indices.rank() - 1),
               x.shape().end());
  Tensor& y = ctx.output(0, x.dtype(), shape);
  visit_storage(x.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U* src = storage<U>(x);
    U* dst = storage<U>(y);
    for (size_t t = 0; t < nd.offsets.size(); ++t) {
      std::copy(src + nd.offsets[t], src + nd.offsets[t] + nd.slice, dst + t * nd.slice);
    }
  });
}

void scatter_nd_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& updates = ctx.in(2);
  if (updates.dtype() != x.dtype()) ctx.fail("updates must have the element type of data");
  const int reduction = reduction_of(ctx);
  const NdIndex nd = nd_index(ctx, x, ctx.in(1), 0);
  if (updates.numel() != static_cast<int64_t>(nd.offsets.size()) * nd.slice)
    ctx.fail("updates have the wrong shape");
  Tensor& y = ctx.output_copy_of_input(0, 0);
  visit_elements(ctx, 0, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* u = elements<T>(updates);
    T* dst = elements<T>(y);
    for (size_t t = 0; t < nd.offsets.size(); ++t) {
      for (int64_t i = 0; i < nd.slice; ++i)
        apply_update(dst[nd.offsets[t] + i], u[t * nd.slice + i], reduction);
    }
  });
}

// A numeric scalar or tensor read as double values.
std::vector<double> values_as_double(const OpContext& ctx, int input) {
  const Tensor& t = ctx.in(input);
  std::vector<double> v(static_cast<size_t>(t.numel()));
  if (!kc::visit_dtype<kc::kNumeric>(t.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(kc::load(t.data<T>()[i]));
      })) {
    ctx.unsupported_dtype(input);
  }
  return v;
}

void one_hot_op(OpContext& ctx) {
  const Tensor& indices = ctx.in(0);
  const auto depth_v = values_as_double(ctx, 1);
  if (depth_v.size() != 1) ctx.fail("depth must be a scalar");
  const int64_t depth = static_cast<int64_t>(depth_v[0]);
  const Tensor& values = ctx.in(2);
  if (values.numel() != 2) ctx.fail("values must hold [off_value, on_value]");
  const int64_t rank = indices.rank() + 1;
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), rank);
  const auto idx = values_as_double(ctx, 0);
  Shape shape = indices.shape();
  shape.insert(shape.begin() + axis, depth);
  const int64_t outer = product(indices.shape(), 0, static_cast<size_t>(axis));
  const int64_t inner = product(indices.shape(), static_cast<size_t>(axis), indices.shape().size());
  Tensor& y = ctx.output(0, values.dtype(), shape);
  visit_storage(values.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U off = storage<U>(values)[0], on = storage<U>(values)[1];
    U* out = storage<U>(y);
    std::fill(out, out + y.numel(), off);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        int64_t v = static_cast<int64_t>(idx[o * inner + i]);
        if (v < 0) v += depth;
        if (v >= 0 && v < depth) out[(o * depth + v) * inner + i] = on;
      }
    }
  });
}

void compress_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& cond = ctx.in(1);
  if (cond.dtype() != DType::kBool || cond.rank() != 1)
    ctx.fail("condition must be a 1-D bool tensor");
  const bool has_axis = ctx.has_attr("axis");
  const int64_t axis = has_axis ? normalize_axis(ctx, ctx.attr_int("axis"), x.rank()) : 0;
  const Shape view = has_axis ? x.shape() : Shape{x.numel()};
  const int64_t dim = view[axis];
  if (cond.numel() > dim) ctx.fail("condition is longer than the compressed axis");
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (cond.data<bool>()[i]) keep.push_back(i);
  }
  Shape shape = view;
  shape[axis] = static_cast<int64_t>(keep.size());
  Tensor& y = ctx.output(0, x.dtype(), shape);
  const size_t a = static_cast<size_t>(axis);
  visit_storage(x.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    kc::gather_axis<U>(storage<U>(x), product(view, 0, a), dim, product(view, a + 1, view.size()),
                       keep.data(), static_cast<int64_t>(keep.size()), storage<U>(y));
  });
}

// Scatter with a reduction on 16-bit data accumulates in fp32 and rounds once per element
// (amp-semantics.md section 1): an embedding gradient (ScatterND, add) with a repeated token
// then equals its fp32 twin rounded, instead of rounding after every addition.
template <nn::OpFn op>
void scatter_accumulating_op(OpContext& ctx) {
  const DType t = ctx.in(0).dtype();
  const bool low = t == DType::kFloat16 || t == DType::kBFloat16;
  if (low && plan::params<plan::ScatterParams>(ctx.step()).reduction() != plan::ScatterParams::NONE)
    return nn::run_widened(ctx, op);
  op(ctx);
}

}  // namespace

void register_tensor_indexing(OpRegistry& r) {
  r.add("Gather", gather_op);
  r.add("GatherElements", gather_elements_op);
  r.add("GatherND", gather_nd_op);
  r.add("ScatterElements", scatter_accumulating_op<scatter_elements_op>);
  r.add("Scatter", scatter_elements_op);
  r.add("ScatterND", scatter_accumulating_op<scatter_nd_op>);
  r.add("OneHot", one_hot_op);
  r.add("Compress", compress_op);
}

}  // namespace ampc::rt::cpu
