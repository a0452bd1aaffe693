#include "kernels/shared/workspace_bytes.h"

#include "kernels/shared/amp_math.h"
#include "kernels/shared/batchnorm_layout.h"
#include "kernels/shared/reduce_math.h"
#include "kernels/shared/rowwise.h"
#include "kernels/shared/scatter_math.h"

namespace ampc::kernels::shared {

size_t softmax_cross_entropy_workspace_bytes(int64_t n, int64_t, int64_t d, CeReduction reduction) {
  if (reduction == CeReduction::kNone) return 0;
  return static_cast<size_t>(2 * n * d) * sizeof(float);
}

size_t reduce_workspace_bytes(ReduceOp, DType dtype, int rank, const int64_t* dims,
                              const bool* reduced) {
  const ReduceShape s = checked_reduce_shape(rank, dims, reduced);
  const size_t acc = dtype == DType::kFloat64 ? 8 : 4;  // the accumulator: double for f64
  if (const ChannelReduce ch = channel_reduce(s); ch.ok)
    return static_cast<size_t>(channel_partials(ch)) * acc;
  if (s.general) return 0;
  const SegmentPlan seg = segment_plan(s.outer, s.n, s.inner);
  return seg.segments == 1 ? 0 : static_cast<size_t>(s.outer * seg.segments * s.inner) * acc;
}

size_t scatter_nd_workspace_bytes(const std::vector<int64_t>& data_shape, int64_t num_tuples,
                                  int64_t depth) {
  const dm::ScatterGeometry s = dm::scatter_geometry(data_shape, num_tuples, depth);
  return static_cast<size_t>(dm::scatter_workspace(s.rows, num_tuples).bytes);
}

size_t batch_norm_training_workspace_bytes(int64_t n, int64_t c, int64_t spatial) {
  return static_cast<size_t>(bn::workspace_layout(n, c, spatial).bytes);
}

size_t batch_norm_grad_workspace_bytes(int64_t n, int64_t c, int64_t spatial) {
  return static_cast<size_t>(bn::grad_workspace_layout(n, c, spatial).bytes);
}

size_t layer_norm_grad_workspace_bytes(DType x_dtype, int64_t rows, int64_t cols) {
  const int64_t value_bytes = x_dtype == DType::kFloat64 ? 8 : 4;
  return static_cast<size_t>(layer_norm_grad_layout(rows, cols, value_bytes).bytes);
}

size_t clip_grad_norm_workspace_bytes(int64_t num_tensors, const int64_t* numels) {
  int64_t chunks = 0;
  for (int64_t j = 0; j < num_tensors; ++j) chunks += amp_chunks(numels[j]);
  return static_cast<size_t>(chunks + num_tensors) * sizeof(double) + 16;
}

}  // namespace ampc::kernels::shared
