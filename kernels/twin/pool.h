// CPU twin of kernels/cuda/pool.h, which documents every function: the same functions with
// the same arguments minus the stream, on host pointers (what the CUDA header calls device
// memory, workspaces and flags included, is host memory here). They run the kernels'
// per-element functions (kernels/shared) in the kernels' order, sequentially.
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"

namespace ampc::kernels::twin {

using shared::PoolGeometry;  // kernels::cpu::ConvGeom's fields

void max_pool(DType dtype, const PoolGeometry& g, int64_t planes, const void* x, void* y,
              int64_t* indices, bool column_major);

void average_pool(DType dtype, const PoolGeometry& g, int64_t planes, const void* x, void* y,
                  bool count_include_pad);

void global_average_pool(DType dtype, int64_t planes, int64_t spatial, const void* x, void* y);

void max_pool_grad(DType dtype, const PoolGeometry& g, int64_t planes, const void* x,
                   const void* dy, void* dx);

void average_pool_grad(DType dtype, const PoolGeometry& g, int64_t planes, const void* dy, void* dx,
                       bool count_include_pad);

}  // namespace ampc::kernels::twin
