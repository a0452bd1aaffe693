// Host side of BatchNormalization's kernels (kernels/cuda/batchnorm.cu) and twin
// (kernels/twin/batchnorm.cc): the dtype dispatch and the training workspace's layout.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/shared/batchnorm_math.h"
#include "kernels/shared/elementwise_dispatch.h"

namespace ampc::kernels::shared::bn {

// The compute type for x's storage type: fp64 for f64 (the CPU op computes in double then),
// fp32 otherwise.
template <typename T>
using MathOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Training workspace (byte offsets, 256-byte aligned; 8 bytes reserved per MathOf<T> value so
// that the layout does not depend on the type): per channel and chunk the sums and the squared
// deviations, then per channel the folded affine map a, b.
struct Workspace {
  int64_t splits, part_sum, part_sq, a, b, bytes;
};

inline Workspace workspace_layout(int64_t n, int64_t c, int64_t spatial) {
  if (n < 0 || c < 0 || spatial < 0) throw Error("batch_norm: negative size");
  Workspace w;
  w.splits = stat_splits(n, c, spatial);
  const int64_t part = (c * w.splits * 8 + 255) / 256 * 256;
  const int64_t per_channel = (c * 8 + 255) / 256 * 256;
  w.part_sum = 0;
  w.part_sq = part;
  w.a = 2 * part;
  w.b = 2 * part + per_channel;
  w.bytes = 2 * part + 2 * per_channel;
  return w;
}

// Backward workspace: the forward's four arrays' room for the chunks' sums and squared
// deviations (a and b unused), then per channel and chunk the sums of dy and dy * (x - m), then
// per channel dx's coefficients (GradCoefficients, five values, 8 bytes each reserved).
struct GradWorkspace {
  Workspace stats;
  int64_t part_dy, part_dyx, coefficients, bytes;
};

inline GradWorkspace grad_workspace_layout(int64_t n, int64_t c, int64_t spatial) {
  GradWorkspace g;
  g.stats = workspace_layout(n, c, spatial);
  const int64_t part = (c * g.stats.splits * 8 + 255) / 256 * 256;
  g.part_dy = g.stats.bytes;
  g.part_dyx = g.part_dy + part;
  g.coefficients = g.part_dyx + part;
  g.bytes = g.coefficients + (c * 5 * 8 + 255) / 256 * 256;
  return g;
}

template <typename M>
struct GradWorkspaceArrays {
  M *part_sum, *part_sq, *part_dy, *part_dyx;
  GradCoefficients<M>* coefficients;
};

template <typename M>
GradWorkspaceArrays<M> grad_workspace_arrays(void* workspace, const GradWorkspace& g) {
  char* ws = static_cast<char*>(workspace);
  return {reinterpret_cast<M*>(ws + g.stats.part_sum), reinterpret_cast<M*>(ws + g.stats.part_sq),
          reinterpret_cast<M*>(ws + g.part_dy), reinterpret_cast<M*>(ws + g.part_dyx),
          reinterpret_cast<GradCoefficients<M>*>(ws + g.coefficients)};
}

// The training workspace's arrays of compute type M at w's offsets.
template <typename M>
struct WorkspaceArrays {
  M *part_sum, *part_sq, *a, *b;
};

template <typename M>
WorkspaceArrays<M> workspace_arrays(void* workspace, const Workspace& w) {
  char* ws = static_cast<char*>(workspace);
  return {reinterpret_cast<M*>(ws + w.part_sum), reinterpret_cast<M*>(ws + w.part_sq),
          reinterpret_cast<M*>(ws + w.a), reinterpret_cast<M*>(ws + w.b)};
}

// f(TypeTag<X>, TypeTag<P>, TypeTag<S>) for x, scale/bias and statistics dtypes, each a float
// type (f32, f64, f16, bf16).
template <typename F>
void visit_batch_norm(DType x, DType param, DType stat, F&& f) {
  bool ok = visit_float(x, [&](auto xt) {
    const bool p_ok = visit_float(param, [&](auto pt) {
      if (!visit_float(stat, [&](auto st) { f(xt, pt, st); }))
        unsupported("batch_norm statistics", stat);
    });
    if (!p_ok) unsupported("batch_norm scale/bias", param);
  });
  if (!ok) unsupported("batch_norm input", x);
}

}  // namespace ampc::kernels::shared::bn
