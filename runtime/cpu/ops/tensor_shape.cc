// Operators that change only the shape or make tensors from shapes: Reshape, Flatten, Squeeze,
// Unsqueeze, Shape, Size, ConstantOfShape, Range, EyeLike.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "kernels/cpu/elementwise_types.h"
#include "runtime/cpu/ops/tensor_common.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu {
namespace {

// A copy of input 0 with another shape of the same element count.
void reshaped(OpContext& ctx, Shape shape) {
  const Tensor& x = ctx.in(0);
  if (numel_of(shape) != x.numel()) {
    ctx.fail("cannot reshape " + shape_str(x.shape()) + " to " + shape_str(shape));
  }
  Tensor y = x;
  y.reshape(std::move(shape));
  ctx.set_output(0, std::move(y));
}

void reshape_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  Shape req = ctx.input(1) ? int_values(ctx, 1) : ctx.attr_ints("shape");
  const bool allowzero = ctx.attr_int("allowzero", 0) != 0;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < req.size(); ++i) {
    if (req[i] == 0 && !allowzero) {
      if (static_cast<int64_t>(i) >= x.rank())
        ctx.fail("shape entry 0 at " + std::to_string(i) + " has no input dimension");
      req[i] = x.dim(static_cast<int64_t>(i));
    }
    if (req[i] == -1) {
      if (infer >= 0) ctx.fail("shape " + shape_str(req) + " has more than one -1");
      infer = static_cast<int64_t>(i);
    } else if (req[i] < 0) {
      ctx.fail("shape " + shape_str(req) + " has a negative entry");
    } else {
      known *= req[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0) {
      ctx.fail("cannot reshape " + shape_str(x.shape()) + " to " + shape_str(req));
    }
    req[infer] = x.numel() / known;
  }
  reshaped(ctx, std::move(req));
}

void flatten_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis > x.rank())
    ctx.fail("axis out of range for rank " + std::to_string(x.rank()));
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  reshaped(ctx, {outer, outer ? x.numel() / outer
                              : numel_of({x.shape().begin() + axis, x.shape().end()})});
}

std::vector<int64_t> axes_of(const OpContext& ctx) {
  if (ctx.opset() >= 13) return ctx.input(1) ? int_values(ctx, 1) : std::vector<int64_t>{};
  return ctx.attr_ints("axes");
}

void squeeze_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  std::vector<bool> drop(static_cast<size_t>(x.rank()), false);
  const auto axes = axes_of(ctx);
  for (int64_t a : axes) {
    a = normalize_axis(ctx, a, x.rank());
    if (x.dim(a) != 1)
      ctx.fail("cannot squeeze axis " + std::to_string(a) + " of size " + std::to_string(x.dim(a)));
    drop[a] = true;
  }
  Shape shape;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (!(axes.empty() ? x.dim(i) == 1 : drop[i])) shape.push_back(x.dim(i));
  }
  reshaped(ctx, shape);
}

void unsqueeze_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto axes = axes_of(ctx);
  const int64_t rank = x.rank() + static_cast<int64_t>(axes.size());
  std::vector<bool> added(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    a = normalize_axis(ctx, a, rank);
    if (added[a]) ctx.fail("axis " + std::to_string(a) + " repeated");
    added[a] = true;
  }
  Shape shape;
  int64_t j = 0;
  for (int64_t i = 0; i < rank; ++i) shape.push_back(added[i] ? 1 : x.dim(j++));
  reshaped(ctx, shape);
}

void shape_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t rank = x.rank();
  auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  const int64_t start = clamp(ctx.attr_int("start", 0));
  const int64_t end = clamp(ctx.attr_int("end", rank));
  const int64_t n = std::max<int64_t>(0, end - start);
  Tensor& y = ctx.output(0, DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) y.data<int64_t>()[i] = x.dim(start + i);
}

void constant_of_shape_op(OpContext& ctx) {
  const Shape shape = int_values(ctx, 0);
  for (int64_t d : shape) {
    if (d < 0) ctx.fail("shape " + shape_str(shape) + " has a negative dimension");
  }
  const plan::FillParams& p = plan::params<plan::FillParams>(ctx.step());
  const std::optional<DType> known = plan::fill_dtype(p);
  if (!known) ctx.fail("the fill value is not one element of a known numeric type");
  const DType dtype = *known;
  Tensor y(dtype, shape);
  const size_t w = dtype_size(dtype);
  auto* dst = static_cast<uint8_t*>(y.raw());
  for (int64_t i = 0; i < y.numel(); ++i) std::memcpy(dst + i * w, p.value().data(), w);
  ctx.set_output(0, std::move(y));
}

void range_op(OpContext& ctx) {
  for (int i : {1, 2}) {
    if (ctx.in(i).dtype() != ctx.in(0).dtype())
      ctx.fail("start, limit and delta must have one type");
  }
  if (!kc::visit_dtype<kc::kFloats | kc::kSigned>(ctx.in(0).dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        using M = kc::opmath_t<T>;
        const M start = kc::load(ctx.in(0).data<T>()[0]);
        const M limit = kc::load(ctx.in(1).data<T>()[0]);
        const M delta = kc::load(ctx.in(2).data<T>()[0]);
        if (delta == M(0)) ctx.fail("delta is zero");
        const double span =
            (static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta);
        const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(span)));
        Tensor& y = ctx.output(0, ctx.in(0).dtype(), {n});
        // Repeated addition, as the ONNX function body and numpy's arange for floats do.
        M v = start;
        for (int64_t i = 0; i < n; ++i, v = static_cast<M>(v + delta))
          y.data<T>()[i] = kc::store<T>(v);
      })) {
    ctx.unsupported_dtype(0);
  }
}

void eye_like_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (x.rank() != 2) ctx.fail("input must be 2-D, got " + shape_str(x.shape()));
  const DType dtype = ctx.has_attr("dtype") ? static_cast<DType>(ctx.attr_int("dtype")) : x.dtype();
  const int64_t k = ctx.attr_int("k", 0);
  Tensor& y = ctx.output(0, dtype, x.shape());
  if (!kc::visit_dtype<kc::kAllTypes>(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* out = y.data<T>();
        for (int64_t i = 0; i < x.dim(0); ++i) {
          const int64_t j = i + k;
          if (j >= 0 && j < x.dim(1)) out[i * x.dim(1) + j] = kc::store<T>(1);
        }
      })) {
    ctx.fail("element type " + std::string(dtype_name(dtype)) + " is not supported");
  }
}

}  // namespace

void register_tensor_shape(OpRegistry& r) {
  r.add("Reshape", reshape_op);
  r.add("Flatten", flatten_op);
  r.add("Squeeze", squeeze_op);
  r.add("Unsqueeze", unsqueeze_op);
  r.add("Shape", shape_op);
  r.add("Size", [](OpContext& ctx) {
    ctx.output(0, DType::kInt64, {}).data<int64_t>()[0] = ctx.in(0).numel();
  });
  r.add("ConstantOfShape", constant_of_shape_op);
  r.add("Range", range_op);
  r.add("EyeLike", eye_like_op);
}

}  // namespace ampc::rt::cpu
