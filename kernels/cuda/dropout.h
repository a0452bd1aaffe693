// Dropout on the device, kernels/shared/dropout_math.h's DropoutElement per element: in
// training mode (and ratio > 0) element i is kept where uniform_at(key, i) >= ratio and scaled
// by 1 / (1 - ratio) in the compute type (f32 for the 16-bit types), else zeroed; otherwise
// y = x. mask (bool) and mask_values (x's type, 0 or 1; the mask of opsets before 10) may each be
// null. key: key.run, when set, points at the run's key in device memory (written before each
// run, so that a captured graph draws new masks every run), and the kernel uses
// step_key(*key.run, key.step); else key.fixed. The draws are the CPU backend's bit for bit.
// x, y: f32, f64, f16, bf16 (the same type); y may alias x. Asynchronous, no allocation,
// capturable. CPU twin: kernels/twin/dropout.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/dropout_math.h"

namespace ampc::kernels::cuda {

void dropout(DType dtype, const void* x, void* y, bool* mask, void* mask_values, int64_t n,
             double ratio, bool training, shared::DropoutKey key, cudaStream_t stream);

}  // namespace ampc::kernels::cuda
