// CPU twin of kernels/cuda/amp.h (same arguments minus the stream; every pointer, scalars
// included, is host memory; the workspace is host memory of clip_grad_norm_workspace_bytes),
// in the kernels' chunking and summation order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/workspace_bytes.h"

namespace ampc::kernels::twin {

void unscale_check(int64_t num_tensors, const DType* dtypes, const void* const* grads,
                   void* const* outs, const int64_t* numels, const void* inv_scale,
                   void* found_inf);

void update_scale(const void* scale, const void* growth_tracker, const void* found_inf,
                  float growth_factor, float backoff_factor, int64_t growth_interval,
                  bool has_min_scale, float min_scale, bool has_max_scale, float max_scale,
                  void* new_scale, void* new_growth_tracker);

using shared::clip_grad_norm_workspace_bytes;

void clip_grad_norm(int64_t num_tensors, const DType* dtypes, const void* const* grads,
                    void* const* outs, const int64_t* numels, bool has_max_norm, float max_norm,
                    void* total_norm, void* workspace);

}  // namespace ampc::kernels::twin
