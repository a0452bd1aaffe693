// ampc.RangeStats: memset of the workspace, a counting kernel (per-block shared counts, then
// 64-bit atomics), a one-block kernel that writes the doubles. Counts, maxima and minima do
// not depend on the order of the atomics, so the twin's result is the kernel's bit for bit.
#include <cstdint>
#include <string>

#include "kernels/cuda/data_launch.cuh"
#include "kernels/cuda/range_stats.h"
#include "kernels/shared/range_stats.h"

namespace ampc::kernels::cuda {
namespace {

namespace rs = ampc::kernels::range_stats;

template <int kDtype>
__device__ float load(const void* x, int64_t i) {
  if constexpr (kDtype == 1) {
    return rs::fp16_bits_to_float(static_cast<const uint16_t*>(x)[i]);
  } else if constexpr (kDtype == 2) {
    return rs::bf16_bits_to_float(static_cast<const uint16_t*>(x)[i]);
  } else {
    return static_cast<const float*>(x)[i];
  }
}

template <int kDtype>
__global__ void __launch_bounds__(rs::kThreads)
    count_kernel(const void* __restrict__ x, int64_t numel, const bool* enabled, const float* scale,
                 unsigned long long* __restrict__ counters) {
  if (enabled && !*enabled) return;
  __shared__ unsigned long long shared[rs::kWorkCounters];
  __shared__ unsigned int max_bits, inv_min_bits;
  for (int k = threadIdx.x; k < rs::kWorkCounters; k += blockDim.x) shared[k] = 0;
  if (threadIdx.x == 0) max_bits = inv_min_bits = 0;
  __syncthreads();
  const float s = scale ? *scale : 1.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += stride) {
    const rs::ElementBins e = rs::bin_element(load<kDtype>(x, i), s);
    atomicAdd(&shared[e.true_class], 1ull);
    atomicAdd(&shared[rs::kClasses + e.scaled_class], 1ull);
    if (e.bin < 0) continue;
    atomicAdd(&shared[2 * rs::kClasses + e.bin], 1ull);
    atomicMax(&max_bits, shared::to_bits(e.abs));
    atomicMax(&inv_min_bits, ~shared::to_bits(e.abs));
  }
  __syncthreads();
  for (int k = threadIdx.x; k < rs::kWorkCounters; k += blockDim.x)
    if (shared[k]) atomicAdd(&counters[k], shared[k]);
  if (threadIdx.x == 0) {
    auto* bits = reinterpret_cast<unsigned int*>(counters + rs::kWorkCounters);
    atomicMax(&bits[0], max_bits);
    atomicMax(&bits[1], inv_min_bits);
  }
}

__global__ void finish_kernel(const unsigned long long* counters, int64_t numel,
                              const bool* enabled, const float* scale, double* out) {
  if (threadIdx.x != 0) return;
  if (enabled && !*enabled) {
    for (int k = 0; k < rs::kSize; ++k) out[k] = 0.0;
    return;
  }
  const auto* bits = reinterpret_cast<const unsigned int*>(counters + rs::kWorkCounters);
  rs::finish(counters, bits[0], bits[1], numel, scale ? *scale : 1.0f, out);
}

}  // namespace

void range_stats(DType dtype, const void* x, int64_t numel, const void* enabled, const void* scale,
                 void* out, void* workspace, cudaStream_t stream) {
  auto* counters = static_cast<unsigned long long*>(workspace);
  const auto* on = static_cast<const bool*>(enabled);
  const auto* s = static_cast<const float*>(scale);
  detail::check_call(cudaMemsetAsync(workspace, 0, rs::kWorkBytes, stream), "range_stats");
  const unsigned grid = static_cast<unsigned>(rs::blocks_for(numel));
  switch (dtype) {
    case DType::kFloat32:
      count_kernel<0><<<grid, rs::kThreads, 0, stream>>>(x, numel, on, s, counters);
      break;
    case DType::kFloat16:
      count_kernel<1><<<grid, rs::kThreads, 0, stream>>>(x, numel, on, s, counters);
      break;
    case DType::kBFloat16:
      count_kernel<2><<<grid, rs::kThreads, 0, stream>>>(x, numel, on, s, counters);
      break;
    default:
      throw Error("range_stats: unsupported dtype " + std::string(dtype_name(dtype)));
  }
  detail::check_launch("range_stats");
  finish_kernel<<<1, 32, 0, stream>>>(counters, numel, on, s, static_cast<double*>(out));
  detail::check_launch("range_stats finish");
}

}  // namespace ampc::kernels::cuda
