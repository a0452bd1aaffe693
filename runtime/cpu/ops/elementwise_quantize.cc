// Linear quantization: QuantizeLinear, DequantizeLinear (per-tensor or per-axis scale and zero
// point) and DynamicQuantizeLinear (uint8, scale and zero point from the data's range).
// Rounding is to nearest even, as the spec says; results saturate to the integer type.
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/cpu/ops/elementwise_common.h"

namespace ampc::rt::cpu {
namespace {

using kc::Shape;

// The shape a scale or zero point broadcasts with x: a scalar, or a 1-D tensor of x's size on
// `axis` (default 1), lined up at that axis.
Shape param_shape(const OpContext& ctx, const Tensor& x, const Tensor& param) {
  if (param.numel() == 1 && param.rank() <= 1) return {};
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis >= x.rank())
    ctx.fail("axis is out of range for rank " + std::to_string(x.rank()));
  if (param.rank() != 1 || param.dim(0) != x.dim(axis)) {
    ctx.fail("scale / zero point of shape " + shape_str(param.shape()) +
             " is neither a scalar nor one value per element of axis " + std::to_string(axis));
  }
  Shape s(static_cast<size_t>(x.rank() - axis), 1);
  s[0] = param.dim(0);
  return s;
}

// Zero point input `i`, or a uint8 zero when it is omitted.
Tensor zero_point(const OpContext& ctx, int i) {
  if (const Tensor* z = ctx.input(i)) return *z;
  return Tensor(DType::kUInt8, {});
}

template <typename Q>
Q saturate(float v) {
  const float lo = static_cast<float>(std::numeric_limits<Q>::lowest());
  const float hi = static_cast<float>(std::numeric_limits<Q>::max());
  return static_cast<Q>(std::clamp(v, lo, hi));
}

void quantize_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& scale = ctx.in(1);
  const Tensor zp = zero_point(ctx, 2);
  if (scale.dtype() != DType::kFloat32) ctx.unsupported_dtype(1);
  const Shape ps = param_shape(ctx, x, scale);
  if (zp.numel() != scale.numel()) ctx.fail("zero point and scale have different sizes");
  dispatch<kc::kFloats>(ctx, 0, [&](auto xtag) {
    using X = typename decltype(xtag)::type;
    if (!kc::visit_dtype<kc::kIntegers>(zp.dtype(), [&](auto ztag) {
          using Q = typename decltype(ztag)::type;
          if constexpr (sizeof(Q) == 1) {
            Tensor& y = ctx.output(0, zp.dtype(), x.shape());
            kc::ternary_map(x.data<X>(), x.shape(), scale.data<float>(), ps, zp.data<Q>(), ps,
                            y.data<Q>(), x.shape(), [](auto v, float s, auto z) {
                              return saturate<Q>(std::nearbyint(static_cast<float>(v) / s) +
                                                 static_cast<float>(z));
                            });
          } else {
            ctx.unsupported_dtype(2);
          }
        })) {
      ctx.unsupported_dtype(2);
    }
  });
}

void dequantize_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& scale = ctx.in(1);
  Tensor zp = zero_point(ctx, 2);
  if (!ctx.input(2)) zp = cast_tensor(ctx, zp, x.dtype());
  if (scale.dtype() != DType::kFloat32) ctx.unsupported_dtype(1);
  if (zp.dtype() != x.dtype()) ctx.fail("zero point and input have different element types");
  const Shape ps = param_shape(ctx, x, scale);
  dispatch<kc::kIntegers>(ctx, 0, [&](auto tag) {
    using Q = typename decltype(tag)::type;
    Tensor& y = ctx.output(0, DType::kFloat32, x.shape());
    kc::ternary_map(x.data<Q>(), x.shape(), scale.data<float>(), ps, zp.data<Q>(), ps,
                    y.data<float>(), x.shape(), [](auto v, float s, auto z) {
                      return static_cast<float>(static_cast<int64_t>(v) - static_cast<int64_t>(z)) *
                             s;
                    });
  });
}

void dynamic_quantize_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (x.dtype() != DType::kFloat32) ctx.unsupported_dtype(0);
  const float* in = x.data<float>();
  float lo = 0.0f, hi = 0.0f;  // the range always includes 0
  for (int64_t i = 0; i < x.numel(); ++i) {
    lo = std::min(lo, in[i]);
    hi = std::max(hi, in[i]);
  }
  const float scale = (hi - lo) / 255.0f;
  const uint8_t zp = scale > 0 ? saturate<uint8_t>(std::nearbyint(-lo / scale)) : 0;
  Tensor& y = ctx.output(0, DType::kUInt8, x.shape());
  uint8_t* out = y.data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    out[i] = scale > 0 ? saturate<uint8_t>(std::nearbyint(in[i] / scale) + zp) : zp;
  }
  ctx.output(1, DType::kFloat32, {}).data<float>()[0] = scale;
  ctx.output(2, DType::kUInt8, {}).data<uint8_t>()[0] = zp;
}

}  // namespace

void register_elementwise_quantize(OpRegistry& r) {
  r.add("QuantizeLinear", quantize_op);
  r.add("DequantizeLinear", dequantize_op);
  r.add("DynamicQuantizeLinear", dynamic_quantize_op);
}

}  // namespace ampc::rt::cpu
