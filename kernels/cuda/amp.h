// The loss scaler's ops of the "ampc" domain on the GPU (the CPU ops: runtime/cpu/ops/
// amp_ops.cc): UnscaleCheck, UpdateScale, ClipGradNorm. Multi-tensor: the host arrays
// (dtypes, pointers, sizes) are read during the call and passed to the kernels by value, so a
// captured graph keeps them. found_inf stays on the device. CPU twin: kernels/twin/amp.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/workspace_bytes.h"

namespace ampc::kernels::cuda {

// UnscaleCheck: out[j] = grad[j] * inv_scale (grad[j] of dtypes[j]: f32, f64, f16, bf16;
// out[j] may alias grad[j]); found_inf (one bool byte) = some input element is not finite.
// inv_scale: a device f32 scalar. Writes found_inf even with no tensors.
void unscale_check(int64_t num_tensors, const DType* dtypes, const void* const* grads,
                   void* const* outs, const int64_t* numels, const void* inv_scale, void* found_inf,
                   cudaStream_t stream);

// UpdateScale (torch's _amp_update_scale_ plus optional bounds): reads scale (f32),
// growth_tracker (i32) and found_inf (bool) on the device, writes new_scale (f32) and
// new_growth_tracker (i32), which may alias the inputs. growth_interval >= 1.
void update_scale(const void* scale, const void* growth_tracker, const void* found_inf,
                  float growth_factor, float backoff_factor, int64_t growth_interval,
                  bool has_min_scale, float min_scale, bool has_max_scale, float max_scale,
                  void* new_scale, void* new_growth_tracker, cudaStream_t stream);

// Device workspace that clip_grad_norm needs for these gradient sizes.
using shared::clip_grad_norm_workspace_bytes;

// ClipGradNorm (torch.nn.utils.clip_grad_norm_, 2-norm): total_norm (device f32 scalar) =
// the 2-norm of the per-tensor norms (fp64 sums, each norm rounded to fp32); with
// has_max_norm, out[j] = grad[j] * min(max_norm / (total + 1e-6), 1) (outs may alias grads);
// without it outs is ignored (may be null). dtypes: f32, f64, f16, bf16.
void clip_grad_norm(int64_t num_tensors, const DType* dtypes, const void* const* grads,
                    void* const* outs, const int64_t* numels, bool has_max_norm, float max_norm,
                    void* total_norm, void* workspace, cudaStream_t stream);

}  // namespace ampc::kernels::cuda
