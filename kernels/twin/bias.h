// CPU twin of kernels/cuda/bias.h (same arguments minus the stream, host pointers).
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace ampc::kernels::twin {

void add_channel_bias(DType dtype, void* y, const void* b, int64_t n, int64_t c, int64_t spatial);

}  // namespace ampc::kernels::twin
