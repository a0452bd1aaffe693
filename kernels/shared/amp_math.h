// The loss scaler's math (the CPU ops: runtime/cpu/ops/amp_ops.cc), shared by the CUDA kernels
// (kernels/cuda/amp.cu) and their twin (kernels/twin/amp.cc).
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"
#include "kernels/shared/hd.h"
#include "kernels/shared/rowwise_fp.h"
#include "kernels/shared/rowwise_tree.h"

namespace ampc::kernels::shared {

// Multi-tensor kernels: one block of kAmpThreads per chunk of kAmpChunk elements of a tensor.
// ClipGradNorm's per-chunk sums of squares follow the row-reduction order (rowwise_tree.h)
// with RowPlan{kAmpThreads, 1} over the chunk; a tensor's chunks are then added in order, and
// the tensors' squared norms in order.
constexpr int kAmpThreads = 256;
constexpr int64_t kAmpChunk = 16384;
constexpr int kAmpMaxTensorsPerLaunch = 48;  // keeps the kernel's by-value table < 4 KiB

// UnscaleCheck (factor: inv_scale) and ClipGradNorm's clipping (factor: the coefficient) of
// element i: y[i] = x[i] * factor, one rounding; true when x[i] is inf or NaN (found_inf).
template <typename T>
AMPC_HD bool scale_element(const T* x, T* y, int64_t i, typename Elem<T>::Math factor) {
  const typename Elem<T>::Math v = Elem<T>::load(x[i]);
  if (y) y[i] = Elem<T>::store(mul(v, factor));  // null: checked only
  return !is_finite(v);
}

// ClipGradNorm: one element's square in double.
AMPC_HD double add_square(double acc, double v) {
  return add(acc, mul(v, v));
}
// A tensor's norm rounded to fp32 (torch.norm's result), squared back in double.
AMPC_HD double norm_squared(double sum_sq) {
  const double norm = static_cast<double>(static_cast<float>(sqrt_rn(sum_sq)));
  return mul(norm, norm);
}
AMPC_HD float total_norm_of(double sum) {
  return static_cast<float>(sqrt_rn(sum));
}
// min(max_norm / (total + 1e-6), 1) in fp32, with std::min's choice on NaN (keeps the NaN).
AMPC_HD float clip_coef(float max_norm, float total) {
  const float q = div(max_norm, add(total, 1e-6f));
  return 1.0f < q ? 1.0f : q;
}

// A tensor's squared norm from its chunks' sums of squares, added in chunk order.
AMPC_HD double tensor_norm_squared(const double* chunk_sums, int64_t chunks) {
  double sum = 0.0;
  for (int64_t c = 0; c < chunks; ++c) sum = add(sum, chunk_sums[c]);
  return norm_squared(sum);
}

// The total norm from the tensors' squared norms, added in tensor order.
AMPC_HD float total_norm_from(const double* norm_sq, int64_t count) {
  double sum = 0.0;
  for (int64_t j = 0; j < count; ++j) sum = add(sum, norm_sq[j]);
  return total_norm_of(sum);
}

// UpdateScale (torch's _amp_update_scale_ and the optional bounds, with the CPU op's
// double products and std::max / std::min choices).
struct ScaleUpdate {
  float scale;
  int32_t tracker;
};
AMPC_HD ScaleUpdate update_scale_value(float scale, int32_t tracker, bool found_inf,
                                       float growth_factor, float backoff_factor, int64_t interval,
                                       bool has_min, float min_scale, bool has_max,
                                       float max_scale) {
  ScaleUpdate r{scale, 0};
  if (found_inf) {
    r.scale =
        static_cast<float>(mul(static_cast<double>(scale), static_cast<double>(backoff_factor)));
    if (has_min) r.scale = r.scale < min_scale ? min_scale : r.scale;
  } else if (static_cast<int64_t>(tracker) + 1 == interval) {
    const float grown =
        static_cast<float>(mul(static_cast<double>(scale), static_cast<double>(growth_factor)));
    if (is_finite(grown)) r.scale = grown;
    if (has_max) r.scale = max_scale < r.scale ? max_scale : r.scale;
  } else {
    r.tracker = tracker + 1;
  }
  return r;
}

// ---- Host: for the kernels and the twin ----

// Chunks of kAmpChunk elements (blocks) a tensor of numel elements takes.
inline int64_t amp_chunks(int64_t numel) {
  return ceil_div(numel, kAmpChunk);
}

inline void check_growth_interval(int64_t interval) {
  if (interval < 1) {
    throw Error("update_scale: growth_interval must be at least 1, got " +
                std::to_string(interval));
  }
}

}  // namespace ampc::kernels::shared
