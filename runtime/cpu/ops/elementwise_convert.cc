// Type conversion and selection: Cast, CastLike, Identity, Where, Clip, Dropout.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "base/bf16_convert.h"
#include "kernels/twin/dropout.h"
#include "runtime/cpu/ops/elementwise_common.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu {
namespace {

using kc::kAllTypes;
using kc::kNumeric;
using kc::opmath_t;

// Numbers to strings in the shortest form that reads back exactly (what numpy's str does for
// most values), strings to numbers with strtod ("inf", "nan" accepted).
Tensor cast_to_string(const OpContext& ctx, const Tensor& t) {
  Tensor out(DType::kString, t.shape());
  if (!kc::visit_dtype<kNumeric | kc::kBoolType>(t.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* x = t.data<T>();
        for (int64_t i = 0; i < t.numel(); ++i) {
          auto v = kc::load(x[i]);
          char buf[64];
          std::to_chars_result r;
          if constexpr (std::is_same_v<decltype(v), bool>) {
            r = std::to_chars(buf, buf + sizeof buf, static_cast<int>(v));
          } else if constexpr (std::is_floating_point_v<decltype(v)>) {
            if (std::isnan(v)) {
              out.strings()[i] = "NaN";
              continue;
            }
            if (std::isinf(v)) {
              out.strings()[i] = v > 0 ? "INF" : "-INF";
              continue;
            }
            r = std::to_chars(buf, buf + sizeof buf, v);
          } else {
            r = std::to_chars(buf, buf + sizeof buf, v);
          }
          out.strings()[i].assign(buf, r.ptr);
        }
      })) {
    ctx.unsupported_dtype(0);
  }
  return out;
}

// Integers are parsed as integers (exact beyond 2^53), everything else through double.
Tensor cast_from_string(const OpContext& ctx, const Tensor& t, DType to) {
  const bool integral = is_integer(to);
  Tensor parsed(integral ? DType::kInt64 : DType::kFloat64, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const std::string& s = t.strings()[i];
    char* end = nullptr;
    if (integral) {
      parsed.data<int64_t>()[i] = std::strtoll(s.c_str(), &end, 10);
    } else {
      parsed.data<double>()[i] = std::strtod(s.c_str(), &end);
    }
    if (s.empty() || *end != '\0') ctx.fail("cannot convert string '" + s + "' to a number");
  }
  return cast_tensor(ctx, parsed, to);
}

void cast_op(OpContext& ctx, DType to) {
  const Tensor& x = ctx.in(0);
  if (to == x.dtype()) {
    ctx.set_output(0, x);
  } else if (to == DType::kString) {
    ctx.set_output(0, cast_to_string(ctx, x));
  } else if (x.dtype() == DType::kString) {
    ctx.set_output(0, cast_from_string(ctx, x, to));
  } else if (Tensor* y = ctx.placed_apart(0, to, x.shape())) {
    // Converted straight into the planned buffer: no temporary, no copy after.
    cast_into(ctx, x, *y);
  } else {
    ctx.set_output(0, cast_tensor(ctx, x, to));
  }
}

// Cast's `to`: a TensorProto.DataType code, or before opset 6 its name ("FLOAT").
DType cast_target(const OpContext& ctx) {
  return static_cast<DType>(plan::params<plan::CastParams>(ctx.step()).to());
}

void where_op(OpContext& ctx) {
  const Tensor& c = ctx.in(0);
  const Tensor& x = ctx.in(1);
  const Tensor& y = ctx.in(2);
  if (c.dtype() != DType::kBool) ctx.unsupported_dtype(0);
  require_same_dtype(ctx, 1, 2);
  const auto shape = broadcast_or_fail(ctx, {c.shape(), x.shape(), y.shape()});
  dispatch<kAllTypes>(ctx, 1, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor& out = ctx.output_for_overwrite(0, x.dtype(), shape);  // every element written
    kc::select_map(c.data<bool>(), c.shape(), x.data<T>(), x.shape(), y.data<T>(), y.shape(),
                   out.data<T>(), shape);
  });
}

// Clip: bounds are attributes before opset 11 and optional scalar inputs from 11.
void clip_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  dispatch<kNumeric>(ctx, 0, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = opmath_t<T>;
    M lo = std::numeric_limits<M>::lowest(), hi = std::numeric_limits<M>::max();
    if constexpr (std::is_floating_point_v<M>) {
      lo = -std::numeric_limits<M>::infinity();
      hi = std::numeric_limits<M>::infinity();
    }
    if (ctx.opset() < 11) {
      if (ctx.has_attr("min")) lo = static_cast<M>(ctx.attr_float("min", 0.0f));
      if (ctx.has_attr("max")) hi = static_cast<M>(ctx.attr_float("max", 0.0f));
    } else {
      for (int i : {1, 2}) {
        const Tensor* b = ctx.input(i);
        if (!b || b->numel() == 0) continue;
        if (b->dtype() != x.dtype()) require_same_dtype(ctx, 0, i);
        if (b->numel() != 1) ctx.fail("input " + std::to_string(i) + " must be a scalar");
        (i == 1 ? lo : hi) = kc::load(b->data<T>()[0]);
      }
    }
    Tensor& y = ctx.output(0, x.dtype(), x.shape());
    kc::unary_map(x.data<T>(), y.data<T>(), x.numel(),
                  [lo, hi](M v) { return std::min(std::max(v, lo), hi); });
  });
}

// Dropout: the identity (mask all true) unless training_mode (opset 12+) is true and the
// ratio positive; then element i is zeroed where its draw uniform_at(key, i) is below the
// ratio, and the rest scaled by 1 / (1 - ratio): the CUDA kernel's twin
// (kernels/twin/dropout.h, kernels/shared/dropout_math.h). The key is the `seed` attribute;
// without one (PyTorch's export never writes one) the executor's random state: a new mask
// every training step, reproducible and resumable (OpContext::random_key).
void dropout_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const plan::DropoutParams& p = plan::params<plan::DropoutParams>(ctx.step());
  double ratio = p.default_ratio();
  bool training = false;
  if (p.mode_inputs()) {
    if (const Tensor* r = ctx.input(1); r && r->numel() == 1) {
      ratio = kc::load(cast_tensor(ctx, *r, DType::kFloat64).data<double>()[0]);
    }
    if (const Tensor* t = ctx.input(2); t && t->numel() == 1) {
      if (t->dtype() != DType::kBool) ctx.unsupported_dtype(2);
      training = t->data<bool>()[0];
    }
  }
  if (ratio < 0 || ratio >= 1) {
    if (training) ctx.fail("ratio " + std::to_string(ratio) + " is outside [0, 1)");
  }
  training = training && ratio > 0;
  const DType mask_type = p.mask_bool() ? DType::kBool : x.dtype();
  const uint64_t key = !training    ? 0
                       : p.seeded() ? static_cast<uint64_t>(p.seed())
                                    : ctx.random_key();
  dispatch<kc::kFloats>(ctx, 0, [&](auto) {  // the element types the twin takes
    Tensor& y = ctx.output(0, x.dtype(), x.shape());
    bool* mask_bool = nullptr;
    void* mask_values = nullptr;
    if (ctx.has_output(1)) {
      Tensor& mask = ctx.output(1, mask_type, x.shape());
      if (mask_type == DType::kBool) {
        mask_bool = mask.data<bool>();
      } else {
        mask_values = mask.raw();
      }
    }
    kernels::twin::dropout(x.dtype(), x.raw(), y.raw(), mask_bool, mask_values, x.numel(), ratio,
                           training, {.fixed = key});
  });
}

}  // namespace

Tensor cast_tensor(const OpContext& ctx, const Tensor& t, DType to) {
  Tensor out(to, t.shape());
  cast_into(ctx, t, out);
  return out;
}

// f32 <-> bf16 (the bf16 plans' casts) on AVX-512 where the CPU has it; false otherwise.
bool cast_f32_bf16_vector(const Tensor& t, Tensor& out) {
  if (!convert_avx512_available()) return false;
  const DType from = t.dtype(), to = out.dtype();
  if (from == DType::kFloat32 && to == DType::kBFloat16) {
    const float* x = t.data<float>();
    auto* y = reinterpret_cast<uint16_t*>(out.data<BFloat16>());
    kc::parallel_range(t.numel(),
                       [&](int64_t b, int64_t e) { f32_to_bf16_avx512(x + b, y + b, e - b); });
    return true;
  }
  if (from == DType::kBFloat16 && to == DType::kFloat32) {
    const auto* x = reinterpret_cast<const uint16_t*>(t.data<BFloat16>());
    float* y = out.data<float>();
    kc::parallel_range(t.numel(),
                       [&](int64_t b, int64_t e) { bf16_to_f32_avx512(x + b, y + b, e - b); });
    return true;
  }
  return false;
}

void cast_into(const OpContext& ctx, const Tensor& t, Tensor& out) {
  const DType to = out.dtype();
  if (cast_f32_bf16_vector(t, out)) return;
  bool to_ok = true;
  if (!kc::visit_dtype<kAllTypes>(t.dtype(), [&](auto from_tag) {
        using From = typename decltype(from_tag)::type;
        to_ok = kc::visit_dtype<kAllTypes>(to, [&](auto to_tag) {
          using To = typename decltype(to_tag)::type;
          // unary_map loads (exactly) and stores with Cast's conversion, rounding once.
          kc::unary_map(t.data<From>(), out.data<To>(), t.numel(), [](auto v) { return v; });
        });
      })) {
    ctx.unsupported_dtype(0);
  }
  if (!to_ok) ctx.fail("cast to element type " + std::string(dtype_name(to)) + " is not supported");
}

void register_elementwise_convert(OpRegistry& r) {
  r.add("Cast", [](OpContext& ctx) { cast_op(ctx, cast_target(ctx)); });
  r.add("CastLike", [](OpContext& ctx) { cast_op(ctx, ctx.in(1).dtype()); });
  r.add("Identity", [](OpContext& ctx) { ctx.set_output(0, ctx.in(0)); });
  r.add("Where", where_op);
  r.add("Clip", clip_op);
  r.add("Dropout", dropout_op);
}

}  // namespace ampc::rt::cpu
