// Operators along one axis with order: TopK, CumSum, ReverseSequence, Unique; and NonZero.
#include <algorithm>
#include <numeric>

#include "runtime/cpu/ops/tensor_common.h"

namespace ampc::rt::cpu {
namespace {

// A tensor as [outer, dim, inner] around `axis`.
struct AxisView {
  int64_t outer = 1, dim = 1, inner = 1;
  AxisView(const Shape& s, int64_t axis) {
    for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
      (i < axis ? outer : i == axis ? dim : inner) *= s[i];
    }
  }
};

void top_k_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), x.rank());
  const int64_t k = ctx.opset() >= 10 ? int_values(ctx, 1).at(0) : ctx.attr_int("k");
  const bool largest = ctx.attr_int("largest", 1) != 0;
  const bool sorted = ctx.attr_int("sorted", 1) != 0;
  const AxisView v(x.shape(), axis);
  if (k < 0 || k > v.dim)
    ctx.fail("k = " + std::to_string(k) + " is outside [0, " + std::to_string(v.dim) + "]");
  Shape shape = x.shape();
  shape[axis] = k;
  if (!kc::visit_dtype<kc::kNumeric>(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        using M = kc::opmath_t<T>;
        Tensor& values = ctx.output(0, x.dtype(), shape);
        Tensor& indices = ctx.output(1, DType::kInt64, shape);
        const T* in = x.data<T>();
        const int64_t lines = v.outer * v.inner;
#pragma omp parallel if (x.numel() >= kc::kParallelThreshold && lines > 1)
        {
          std::vector<int64_t> order(static_cast<size_t>(v.dim));
          std::vector<M> line(static_cast<size_t>(v.dim));
          // Ties keep the lower index first, as ONNX's reference does; a NaN is larger than
          // every number, as in PyTorch (first when largest, last when smallest), and the
          // order stays a strict weak one with NaNs (a partial_sort needs one).
          auto before = [&](int64_t a, int64_t b) {
            const bool a_nan = kc::is_nan_value(line[a]), b_nan = kc::is_nan_value(line[b]);
            if (a_nan || b_nan) return a_nan && b_nan ? a < b : (largest ? a_nan : b_nan);
            if (line[a] != line[b]) return largest ? line[a] > line[b] : line[a] < line[b];
            return a < b;
          };
#pragma omp for schedule(static)
          for (int64_t l = 0; l < lines; ++l) {
            const int64_t o = l / v.inner, i = l % v.inner;
            for (int64_t j = 0; j < v.dim; ++j)
              line[j] = kc::load(in[(o * v.dim + j) * v.inner + i]);
            std::iota(order.begin(), order.end(), 0);
            std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
            if (!sorted) std::sort(order.begin(), order.begin() + k);
            for (int64_t j = 0; j < k; ++j) {
              const int64_t at = (o * k + j) * v.inner + i;
              values.data<T>()[at] = in[(o * v.dim + order[j]) * v.inner + i];
              indices.data<int64_t>()[at] = order[j];
            }
          }
        }
      })) {
    ctx.unsupported_dtype(0);
  }
}

void cum_sum_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto axis_v = int_values(ctx, 1);
  if (axis_v.size() != 1) ctx.fail("axis must be a scalar");
  const int64_t axis = normalize_axis(ctx, axis_v[0], x.rank());
  const bool exclusive = ctx.attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.attr_int("reverse", 0) != 0;
  const AxisView v(x.shape(), axis);
  if (!kc::visit_dtype<kc::kNumeric>(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        using M = kc::opmath_t<T>;
        Tensor& y = ctx.output(0, x.dtype(), x.shape());
        const T* in = x.data<T>();
        T* out = y.data<T>();
        const int64_t lines = v.outer * v.inner;
#pragma omp parallel for schedule(static) if (x.numel() >= kc::kParallelThreshold)
        for (int64_t l = 0; l < lines; ++l) {
          const int64_t o = l / v.inner, i = l % v.inner;
          M acc = 0;
          for (int64_t s = 0; s < v.dim; ++s) {
            const int64_t j = reverse ? v.dim - 1 - s : s;
            const int64_t at = (o * v.dim + j) * v.inner + i;
            const M val = kc::load(in[at]);
            if (!exclusive) acc = static_cast<M>(acc + val);
            out[at] = kc::store<T>(acc);
            if (exclusive) acc = static_cast<M>(acc + val);
          }
        }
      })) {
    ctx.unsupported_dtype(0);
  }
}

void non_zero_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  std::vector<int64_t> hits;
  if (!kc::visit_dtype<kc::kAllTypes>(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        for (int64_t i = 0; i < x.numel(); ++i) {
          if (kc::load(x.data<T>()[i]) != decltype(kc::load(T{}))(0)) hits.push_back(i);
        }
      })) {
    ctx.unsupported_dtype(0);
  }
  const int64_t n = static_cast<int64_t>(hits.size());
  Tensor& y = ctx.output(0, DType::kInt64, {x.rank(), n});
  for (int64_t h = 0; h < n; ++h) {
    int64_t flat = hits[h];
    for (int64_t d = x.rank(); d-- > 0;) {
      y.data<int64_t>()[d * n + h] = flat % x.dim(d);
      flat /= x.dim(d);
    }
  }
}

void reverse_sequence_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto lens = int_values(ctx, 1);
  const int64_t time_axis = ctx.attr_int("time_axis", 0),
                batch_axis = ctx.attr_int("batch_axis", 1);
  if (x.rank() < 2 ||
      !((time_axis == 0 && batch_axis == 1) || (time_axis == 1 && batch_axis == 0))) {
    ctx.fail("time_axis and batch_axis must be 0 and 1 in some order");
  }
  const int64_t batch = x.dim(batch_axis), steps = x.dim(time_axis);
  if (static_cast<int64_t>(lens.size()) != batch)
    ctx.fail("sequence_lens must have one entry per batch");
  const Shape strides = kc::contiguous_strides(x.shape());
  const int64_t inner = strides[1];
  Tensor& y = ctx.output_copy_of_input(0, 0);  // the steps past each length stay as they are
  visit_storage(x.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U* src = storage<U>(x);
    U* dst = storage<U>(y);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = std::clamp<int64_t>(lens[b], 0, steps);
      for (int64_t t = 0; t < len; ++t) {
        const int64_t from = b * strides[batch_axis] + (len - 1 - t) * strides[time_axis];
        const int64_t to = b * strides[batch_axis] + t * strides[time_axis];
        std::copy(src + from, src + from + inner, dst + to);
      }
    }
  });
}

// Unique: distinct elements (no axis: of the flattened input) or distinct slices along `axis`,
// ascending (sorted=1, slices compared lexicographically) or in order of first occurrence;
// with the first-occurrence indices, the inverse indices and the counts.
void unique_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const bool has_axis = ctx.has_attr("axis");
  const int64_t axis = has_axis ? normalize_axis(ctx, ctx.attr_int("axis"), x.rank()) : 0;
  const bool sorted = ctx.attr_int("sorted", 1) != 0;
  const Shape view = has_axis ? x.shape() : Shape{x.numel()};
  const AxisView v(view, axis);
  if (!kc::visit_dtype<kc::kAllTypes>(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        using M = kc::opmath_t<T>;
        const T* in = x.data<T>();
        auto at = [&](int64_t j, int64_t k) {  // element k (over outer x inner) of slice j
          return kc::load(in[((k / v.inner) * v.dim + j) * v.inner + k % v.inner]);
        };
        const int64_t width = v.outer * v.inner;
        auto less = [&](int64_t a, int64_t b) {
          for (int64_t k = 0; k < width; ++k) {
            const M p = at(a, k), q = at(b, k);
            if (p != q) return p < q;
          }
          return false;
        };
        std::vector<int64_t> order(static_cast<size_t>(v.dim));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), less);
        // Groups of equal slices: first occurrence (stable sort keeps it first) and members.
        std::vector<std::vector<int64_t>> groups;
        for (size_t i = 0; i < order.size(); ++i) {
          if (i == 0 || less(order[i - 1], order[i])) groups.emplace_back();
          groups.back().push_back(order[i]);
        }
        if (!sorted) {
          std::sort(groups.begin(), groups.end(),
                    [](const auto& a, const auto& b) { return a.front() < b.front(); });
        }
        const int64_t g = static_cast<int64_t>(groups.size());
        Shape y_shape = view;
        y_shape[axis] = g;
        // Local tensors: omitted outputs of OpContext::output share one scratch tensor.
        Tensor y(x.dtype(), y_shape), first(DType::kInt64, {g}), inverse(DType::kInt64, {v.dim}),
            counts(DType::kInt64, {g});
        for (int64_t u = 0; u < g; ++u) {
          const int64_t j = groups[u].front();
          for (int64_t o = 0; o < v.outer; ++o) {
            std::copy(in + (o * v.dim + j) * v.inner, in + (o * v.dim + j + 1) * v.inner,
                      y.data<T>() + (o * g + u) * v.inner);
          }
          first.data<int64_t>()[u] = j;
          counts.data<int64_t>()[u] = static_cast<int64_t>(groups[u].size());
          for (int64_t member : groups[u]) inverse.data<int64_t>()[member] = u;
        }
        ctx.set_output(0, std::move(y));
        ctx.set_output(1, std::move(first));
        ctx.set_output(2, std::move(inverse));
        ctx.set_output(3, std::move(counts));
      })) {
    ctx.unsupported_dtype(0);
  }
}

}  // namespace

void register_tensor_sorting(OpRegistry& r) {
  r.add("Unique", unique_op);
  r.add("TopK", top_k_op);
  r.add("CumSum", cum_sum_op);
  r.add("NonZero", non_zero_op);
  r.add("ReverseSequence", reverse_sequence_op);
}

}  // namespace ampc::rt::cpu
