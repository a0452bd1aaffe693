// CPU twin of kernels/cuda/range_stats.h (same arguments minus the stream; every pointer is
// host memory; the workspace is kernels::range_stats::kWorkBytes of host memory), in the
// kernel's block and grid-stride order.
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace ampc::kernels::twin {

// ampc.RangeStats: x (numel elements of f32, f16 or bf16), enabled (one bool byte; null:
// enabled), scale (f32 scalar; null: 1); out: kSize doubles (kernels/shared/range_stats.h),
// zeros when not enabled.
void range_stats(DType dtype, const void* x, int64_t numel, const void* enabled, const void* scale,
                 void* out, void* workspace);

}  // namespace ampc::kernels::twin
