// The loss scaler's multi-tensor ops of the "ampc" domain (schemas and semantics:
// ops/schemas/amp_schemas.h): UnscaleCheck, UpdateScale, ClipGradNorm. Gradients may be fp32,
// fp64, fp16 or bf16; 16-bit values are computed in fp32 and rounded once when stored
// (amp-semantics.md section 1).
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu {
namespace {

// Element access in the compute type: double for fp64, float otherwise.
template <typename T>
struct Num {
  using Math = float;
  static float load(T v) { return static_cast<float>(v); }
  static T store(float v) { return static_cast<T>(v); }
};
template <>
struct Num<double> {
  using Math = double;
  static double load(double v) { return v; }
  static double store(double v) { return v; }
};
template <>
struct Num<Half> {
  using Math = float;
  static float load(Half v) { return half_to_float(v); }
  static Half store(float v) { return float_to_half(v); }
};
template <>
struct Num<BFloat16> {
  using Math = float;
  static float load(BFloat16 v) { return bf16_to_float(v); }
  static BFloat16 store(float v) { return float_to_bf16(v); }
};

// Calls f.template operator()<T>() for the float type of `t`.
template <typename F>
void dispatch_float(const OpContext& ctx, int index, const Tensor& t, F&& f) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return f.template operator()<float>();
    case DType::kFloat64:
      return f.template operator()<double>();
    case DType::kFloat16:
      return f.template operator()<Half>();
    case DType::kBFloat16:
      return f.template operator()<BFloat16>();
    default:
      ctx.unsupported_dtype(index);
  }
}

template <typename T>
T scalar_of(const OpContext& ctx, int index, const char* name, DType dtype) {
  const Tensor& t = ctx.in(index);
  if (t.dtype() != dtype || t.numel() != 1) {
    ctx.fail(std::string(name) + " must be a " + std::string(dtype_name(dtype)) + " scalar, got " +
             t.type_str());
  }
  return t.data<T>()[0];
}

void set_scalar_bool(OpContext& ctx, int index, bool v) {
  ctx.output(index, DType::kBool, {}).data<bool>()[0] = v;
}

// Whether some element of x[0, n) is inf or NaN. 16-bit values by their bits, without
// converting: a value is not finite exactly when its exponent bits are all set, so the largest
// exponent field is the mask (a max-reduction the compiler vectorises).
template <typename T>
bool any_nonfinite(const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    constexpr uint16_t kExponent = std::is_same_v<T, Half> ? 0x7C00 : 0x7F80;
    const auto* bits = reinterpret_cast<const uint16_t*>(x);
    uint16_t top = 0;
    for (int64_t i = 0; i < n; ++i) top = std::max<uint16_t>(top, bits[i] & kExponent);
    return top == kExponent;
  } else {
    bool bad = false;
    for (int64_t i = 0; i < n; ++i) bad |= !std::isfinite(x[i]);
    return bad;
  }
}

// Every gradient times inv_scale; found_inf when any element of the input is not finite
// (checked on the scaled values, as torch does). A gradient whose output is omitted is only
// checked (the loss scaler's 16-bit gradients, unscaled where the optimizer reads them).
void unscale_check_op(OpContext& ctx) {
  const float inv = scalar_of<float>(ctx, 0, "inv_scale", DType::kFloat32);
  const int n = ctx.num_inputs() - 1;
  if (ctx.num_outputs() != n + 1) {
    ctx.fail("has " + std::to_string(n) + " gradients and so " + std::to_string(n + 1) +
             " outputs (found_inf, then the gradients), got " + std::to_string(ctx.num_outputs()));
  }
  bool found = false;
  for (int j = 0; j < n; ++j) {
    const Tensor& g = ctx.in(j + 1);
    dispatch_float(ctx, j + 1, g, [&]<typename T>() {
      using N = Num<T>;
      using M = typename N::Math;
      const T* x = g.data<T>();
      T* y = ctx.has_output(j + 1) ? ctx.output(j + 1, g.dtype(), g.shape()).template data<T>()
                                   : nullptr;
      if (!y) {
        found |= any_nonfinite(x, g.numel());
        return;
      }
      const M s = static_cast<M>(inv);
      bool bad = false;
      for (int64_t i = 0, e = g.numel(); i < e; ++i) {
        const M v = N::load(x[i]);
        bad |= !std::isfinite(v);
        y[i] = N::store(v * s);
      }
      found |= bad;
    });
  }
  set_scalar_bool(ctx, 0, found);
}

// torch's _amp_update_scale_ (aten/src/ATen/native/cuda/AmpKernels.cu), then the optional
// bounds. The products are taken in double and rounded to fp32, as torch's float * double.
void update_scale_op(OpContext& ctx) {
  const float scale = scalar_of<float>(ctx, 0, "scale", DType::kFloat32);
  const int32_t tracker = scalar_of<int32_t>(ctx, 1, "growth_tracker", DType::kInt32);
  const bool found_inf = scalar_of<bool>(ctx, 2, "found_inf", DType::kBool);
  const plan::ScaleUpdateParams& p = plan::params<plan::ScaleUpdateParams>(ctx.step());
  const double growth = p.growth_factor();
  const double backoff = p.backoff_factor();
  const int64_t interval = p.growth_interval();
  float new_scale = scale;
  int32_t new_tracker = 0;
  if (found_inf) {
    new_scale = static_cast<float>(scale * backoff);
    if (p.has_min_scale()) new_scale = std::max(new_scale, p.min_scale());
  } else if (tracker + 1 == interval) {
    const auto grown = static_cast<float>(scale * growth);
    if (std::isfinite(grown)) new_scale = grown;
    if (p.has_max_scale()) new_scale = std::min(new_scale, p.max_scale());
  } else {
    new_tracker = tracker + 1;
  }
  ctx.output(0, DType::kFloat32, {}).data<float>()[0] = new_scale;
  ctx.output(1, DType::kInt32, {}).data<int32_t>()[0] = new_tracker;
}

// torch.nn.utils.clip_grad_norm_ (2-norm): per-tensor norms (accumulated in double, rounded
// to fp32 as torch.norm's result is), total = their 2-norm, coef = max_norm / (total + 1e-6)
// clamped to 1 in fp32, gradients times coef.
void clip_grad_norm_op(OpContext& ctx) {
  const int n = ctx.num_inputs();
  const plan::ClipParams& p = plan::params<plan::ClipParams>(ctx.step());
  const bool clip = p.clip();
  if (ctx.num_outputs() != (clip ? n + 1 : 1)) {
    ctx.fail(std::string(clip ? "clips" : "without max_norm only measures") + " " +
             std::to_string(n) + " gradients and so has " + std::to_string(clip ? n + 1 : 1) +
             " outputs, got " + std::to_string(ctx.num_outputs()));
  }
  double sum = 0;
  for (int j = 0; j < n; ++j) {
    const Tensor& g = ctx.in(j);
    dispatch_float(ctx, j, g, [&]<typename T>() {
      double s = 0;
      for (int64_t i = 0, e = g.numel(); i < e; ++i) {
        const double v = Num<T>::load(g.data<T>()[i]);
        s += v * v;
      }
      const auto norm = static_cast<float>(std::sqrt(s));
      sum += static_cast<double>(norm) * norm;
    });
  }
  const auto total = static_cast<float>(std::sqrt(sum));
  ctx.output(0, DType::kFloat32, {}).data<float>()[0] = total;
  if (!clip) return;
  const float coef = std::min(p.max_norm() / (total + 1e-6f), 1.0f);
  for (int j = 0; j < n; ++j) {
    const Tensor& g = ctx.in(j);
    dispatch_float(ctx, j, g, [&]<typename T>() {
      using N = Num<T>;
      const T* x = g.data<T>();
      T* y = ctx.output(j + 1, g.dtype(), g.shape()).template data<T>();
      const auto c = static_cast<typename N::Math>(coef);
      for (int64_t i = 0, e = g.numel(); i < e; ++i) y[i] = N::store(N::load(x[i]) * c);
    });
  }
}

}  // namespace

void register_amp_ops(OpRegistry& r) {
  r.add("UnscaleCheck", unscale_check_op, "ampc");
  r.add("UpdateScale", update_scale_op, "ampc");
  r.add("ClipGradNorm", clip_grad_norm_op, "ampc");
}

}  // namespace ampc::rt::cpu
