// CPU twin of kernels/cuda/layernorm.h (same arguments minus the stream, host pointers), in
// the kernel's partition and reduction order (kernels/shared/rowwise_tree.h). It is the CPU
// backend's LayerNormalization too; for the CPU op's f64 every operand is
// f64 (computed in double, no device counterpart).
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace ampc::kernels::twin {

void layer_norm(DType x_dtype, const void* x, int64_t rows, int64_t cols, DType param_dtype,
                const void* scale, const void* bias, float epsilon, void* y, DType stat_dtype,
                void* mean, void* inv_std);

}  // namespace ampc::kernels::twin
