// ampc.RangeStats on a CUDA device (kernels/cuda/range_stats.h) against its CPU twin
// (kernels/twin/range_stats.h), bit for bit: f32, f16 and bf16 tensors spread over fp32's
// range (zeros, fp32 subnormals, fp16 flush / subnormal / overflow, inf, NaN), with a scale
// and without, switched on and off (off: zeros). Skips, saying so, without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/half.h"
#include "kernels/cuda/range_stats.h"
#include "kernels/shared/range_stats.h"
#include "kernels/twin/range_stats.h"
#include "tests/gpu/require_device.h"

namespace ampc::testing {
namespace {

namespace rs = kernels::range_stats;

// n values as raw bytes of `dtype`.
std::vector<unsigned char> spread(DType dtype, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> exp(-140, 40);
  const size_t width = dtype == DType::kFloat32 ? 4 : 2;
  std::vector<unsigned char> bytes(n * width);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t pick = rng() % 50;
    float v = pick == 0   ? 0.0f
              : pick == 1 ? std::numeric_limits<float>::infinity()
              : pick == 2 ? std::nanf("")
                          : static_cast<float>((rng() & 1 ? -1 : 1) * std::exp2(exp(rng)));
    if (dtype == DType::kFloat32) {
      std::memcpy(&bytes[i * 4], &v, 4);
    } else if (dtype == DType::kFloat16) {
      const Half h = float_to_half(v);
      std::memcpy(&bytes[i * 2], &h, 2);
    } else {
      const BFloat16 b = float_to_bf16(v);
      std::memcpy(&bytes[i * 2], &b, 2);
    }
  }
  return bytes;
}

template <typename T>
T* device_copy(const void* host, size_t bytes) {
  void* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, bytes), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  return static_cast<T*>(d);
}

TEST(RangeStatsGpu, KernelEqualsTwin) {
  AMPC_REQUIRE_CUDA_DEVICE();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (size_t n : {size_t{1}, size_t{1000}, size_t{3000000}}) {
      const auto x = spread(dtype, n, static_cast<uint32_t>(n));
      void* dx = device_copy<void>(x.data(), x.size());
      for (bool on : {true, false}) {
        const float scale = 65536.0f;
        void* d_on = device_copy<void>(&on, 1);
        void* d_scale = device_copy<void>(&scale, 4);
        void *d_out = nullptr, *d_work = nullptr;
        ASSERT_EQ(cudaMalloc(&d_out, rs::kSize * 8), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&d_work, rs::kWorkBytes), cudaSuccess);
        kernels::cuda::range_stats(dtype, dx, static_cast<int64_t>(n), d_on, d_scale, d_out, d_work,
                                   nullptr);
        std::vector<double> got(rs::kSize), want(rs::kSize);
        ASSERT_EQ(cudaMemcpy(got.data(), d_out, rs::kSize * 8, cudaMemcpyDeviceToHost),
                  cudaSuccess);
        std::vector<unsigned char> work(rs::kWorkBytes);
        kernels::twin::range_stats(dtype, x.data(), static_cast<int64_t>(n), &on, &scale,
                                   want.data(), work.data());
        EXPECT_EQ(got, want) << dtype_name(dtype) << " n " << n << " enabled " << on;
        for (void* p : {d_on, d_scale, d_out, d_work}) cudaFree(p);
      }
      cudaFree(dx);
    }
  }
}

}  // namespace
}  // namespace ampc::testing
