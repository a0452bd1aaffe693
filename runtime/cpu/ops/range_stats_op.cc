// ampc.RangeStats(x, [enabled], [scale]) -> stats: the fp16 range statistics of one tensor
// (schema and attributes: passes/range_stats.h; layout: kernels/shared/range_stats.h). When
// `enabled` (a bool scalar) is false the op reads nothing and writes zeros, so the step pays
// for the statistics only at the cadence the trainer asks for them.
#include <algorithm>
#include <cstring>
#include <string>

#include "base/half.h"
#include "kernels/shared/range_stats.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"

namespace ampc::rt::cpu {
namespace {

namespace rs = kernels::range_stats;

template <typename Load>
void accumulate(int64_t n, float scale, Load load, double* out) {
  int64_t true_class[rs::kClasses] = {}, scaled_class[rs::kClasses] = {};
  int64_t hist[rs::kHistBins] = {};
  float max_abs = 0.0f, min_nonzero = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const rs::ElementBins e = rs::bin_element(load(i), scale);
    ++true_class[e.true_class];
    ++scaled_class[e.scaled_class];
    if (e.bin < 0) continue;
    ++hist[e.bin];
    max_abs = std::max(max_abs, e.abs);
    min_nonzero = min_nonzero == 0.0f ? e.abs : std::min(min_nonzero, e.abs);
  }
  out[rs::kNumel] = static_cast<double>(n);
  out[rs::kMaxAbs] = max_abs;
  out[rs::kMinNonzeroAbs] = min_nonzero;
  out[rs::kScale] = scale;
  for (int c = 0; c < rs::kClasses; ++c) {
    out[rs::kTrueClass + c] = static_cast<double>(true_class[c]);
    out[rs::kScaledClass + c] = static_cast<double>(scaled_class[c]);
  }
  for (int b = 0; b < rs::kHistBins; ++b) out[rs::kHist + b] = static_cast<double>(hist[b]);
}

void range_stats_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor* enabled = ctx.input(1);
  const Tensor* scale_t = ctx.input(2);
  if (enabled && (enabled->dtype() != DType::kBool || enabled->numel() != 1))
    ctx.fail("enabled must be a bool scalar, got " + enabled->type_str());
  if (scale_t && (scale_t->dtype() != DType::kFloat32 || scale_t->numel() != 1))
    ctx.fail("scale must be an f32 scalar, got " + scale_t->type_str());
  double* out = ctx.output(0, DType::kFloat64, {rs::kSize}).data<double>();
  std::fill(out, out + rs::kSize, 0.0);
  if (enabled && !enabled->data<bool>()[0]) return;
  const float scale = scale_t ? scale_t->data<float>()[0] : 1.0f;
  const int64_t n = x.numel();
  switch (x.dtype()) {
    case DType::kFloat32: {
      const float* p = x.data<float>();
      return accumulate(
          n, scale, [p](int64_t i) { return p[i]; }, out);
    }
    case DType::kFloat64: {  // statistics of the value rounded to fp32
      const double* p = x.data<double>();
      return accumulate(
          n, scale, [p](int64_t i) { return static_cast<float>(p[i]); }, out);
    }
    case DType::kFloat16: {
      const Half* p = x.data<Half>();
      return accumulate(
          n, scale, [p](int64_t i) { return half_to_float(p[i]); }, out);
    }
    case DType::kBFloat16: {
      const BFloat16* p = x.data<BFloat16>();
      return accumulate(
          n, scale, [p](int64_t i) { return bf16_to_float(p[i]); }, out);
    }
    default:
      ctx.unsupported_dtype(0);
  }
}

}  // namespace

void register_range_stats_ops(OpRegistry& r) {
  r.add("RangeStats", range_stats_op, "ampc");
}

}  // namespace ampc::rt::cpu
