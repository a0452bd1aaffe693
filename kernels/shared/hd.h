// Marks functions compiled for both the host (g++) and the device (nvcc): the scalar and
// per-row math that a CUDA kernel and its CPU twin share (kernels/twin, kernels/cuda).
#pragma once

#if defined(__CUDACC__)
#define AMPC_HD __host__ __device__ __forceinline__
#else
#define AMPC_HD inline
#endif
