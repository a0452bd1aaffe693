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

// y [planes, cols] = max over each window's taps inside the image. indices (int64, may be
// null) as the CPU op: plane * image_size + the spatial offset of the first maximum (row-major,
// or column-major with column_major). dtypes: f32, f64, f16, bf16, i8, u8.
void max_pool(DType dtype, const PoolGeometry& g, int64_t planes, const void* x, void* y,
              int64_t* indices, bool column_major);

// y = mean over each window (divisor: taps inside the image, or with count_include_pad also
// those in the padding up to pad_end). dtypes: f32, f64, f16, bf16.
void average_pool(DType dtype, const PoolGeometry& g, int64_t planes, const void* x, void* y,
                  bool count_include_pad);

// y [planes] = mean of x [planes, spatial] (one block per plane). f32, f64, f16, bf16.
void global_average_pool(DType dtype, int64_t planes, int64_t spatial, const void* x, void* y);

// dx [planes, image]: each dy goes to the first maximum of its window in x (as max_pool's
// indices name it); one thread per dx element sums its dy in the CPU kernel's order, so the
// result equals the CPU op's bit for bit. f32, f64, f16, bf16.
void max_pool_grad(DType dtype, const PoolGeometry& g, int64_t planes, const void* x,
                   const void* dy, void* dx);

// dx [planes, image]: each dy spread evenly over its window's taps (divided by
// average_pool's divisor). f32, f64, f16, bf16.
void average_pool_grad(DType dtype, const PoolGeometry& g, int64_t planes, const void* dy, void* dx,
                       bool count_include_pad);

}  // namespace ampc::kernels::twin
