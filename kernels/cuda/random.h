// RandomUniform, RandomNormal and their *Like forms on the device: y[i] =
// kernels/shared/random_math.h's RandomElement (draw.at(key, i) rounded once to the math type,
// then to y's type). key: as Dropout's (kernels/shared/dropout_math.h's DropoutKey): key.run,
// when set, points at the run's key in device memory, written before each run, and the kernel
// uses step_key(*key.run, key.step), so a captured graph draws new values every run; else
// key.fixed (the op's `seed`). The uniform draws are the CPU backend's bit for bit, the normal
// ones to one unit in the last place of y's type (random_math.h says why). y: f32, f64, f16,
// bf16. Asynchronous, no allocation, capturable. CPU twin: kernels/twin/random.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/dropout_math.h"
#include "kernels/shared/random_math.h"

namespace ampc::kernels::cuda {

void random_fill(DType dtype, void* y, int64_t n, shared::RandomDraw draw, shared::DropoutKey key,
                 cudaStream_t stream);

}  // namespace ampc::kernels::cuda
