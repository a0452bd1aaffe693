// Pooling on the device with the CPU kernels' semantics (kernels/cpu/pool.cc, pool_grad.cc):
// MaxPool (optional Indices), AveragePool, GlobalAveragePool, and the gradients
// ampc.MaxPoolGrad and ampc.AveragePoolGrad. Tensors are [planes = N * C, spatial...] with up to
// three spatial dimensions in PoolGeometry's slots (2-D pooling uses slots 1 and 2, slot 0 of
// size 1), exactly as kernels::cpu::ConvGeom. 16-bit floats compute in fp32 and round once.
// Asynchronous, no allocation, capturable. Unsupported cases throw ampc::Error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/kernel_args.h"

namespace ampc::kernels::cuda {

using shared::PoolGeometry;  // kernels::cpu::ConvGeom's fields

// y [planes, cols] = max over each window's taps inside the image. indices (int64, may be
// null) as the CPU op: plane * image_size + the spatial offset of the first maximum (row-major,
// or column-major with column_major). dtypes: f32, f64, f16, bf16, i8, u8.
void max_pool(DType dtype, const PoolGeometry& g, int64_t planes, const void* x, void* y,
              int64_t* indices, bool column_major, cudaStream_t stream);

// y = mean over each window (divisor: taps inside the image, or with count_include_pad also
// those in the padding up to pad_end). dtypes: f32, f64, f16, bf16.
void average_pool(DType dtype, const PoolGeometry& g, int64_t planes, const void* x, void* y,
                  bool count_include_pad, cudaStream_t stream);

// y [planes] = mean of x [planes, spatial] (one block per plane). f32, f64, f16, bf16.
void global_average_pool(DType dtype, int64_t planes, int64_t spatial, const void* x, void* y,
                         cudaStream_t stream);

// dx [planes, image]: each dy goes to the first maximum of its window in x (as max_pool's
// indices name it); one thread per dx element sums its dy in the CPU kernel's order, so the
// result equals the CPU op's bit for bit. f32, f64, f16, bf16.
void max_pool_grad(DType dtype, const PoolGeometry& g, int64_t planes, const void* x,
                   const void* dy, void* dx, cudaStream_t stream);

// dx [planes, image]: each dy spread evenly over its window's taps (divided by
// average_pool's divisor). f32, f64, f16, bf16.
void average_pool_grad(DType dtype, const PoolGeometry& g, int64_t planes, const void* dy, void* dx,
                       bool count_include_pad, cudaStream_t stream);

}  // namespace ampc::kernels::cuda
