// ampc.RangeStats on the GPU (the CPU op: runtime/cpu/ops/range_stats_op.cc; CPU twin:
// kernels/twin/range_stats.h; per-element math: kernels/shared/range_stats.h). Reads the
// `enabled` flag on the device: when false the counting kernel returns at once, so the step
// pays one memset and two tiny launches, and the tensor is not read.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"

namespace ampc::kernels::cuda {

// x: numel elements of f32, f16 or bf16 on the device; enabled: a device bool (null:
// enabled); scale: a device f32 scalar (null: 1); out: kSize device doubles; workspace:
// kernels::range_stats::kWorkBytes of device memory. Everything stays on the device.
void range_stats(DType dtype, const void* x, int64_t numel, const void* enabled, const void* scale,
                 void* out, void* workspace, cudaStream_t stream);

}  // namespace ampc::kernels::cuda
