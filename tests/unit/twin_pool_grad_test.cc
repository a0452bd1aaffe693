// MaxPoolGrad's twin (kernels/twin/pool.cc; on f32 and bf16 the gathers of pool_avx512.h where
// the CPU has AVX-512, else the row loops) against pool_math.h's per-dx-element functor, which
// the CUDA kernel runs one thread per element (an independent formulation: each dx element
// looks for the windows whose first maximum it is). 1-D, 2-D and 3-D windows with strides,
// dilations, padding, windows wholly in the padding, ties, NaNs and more outputs than one
// vector, serial and parallel, bit for bit. The suite runs it again with AMPC_NO_AVX512=1
// (TwinDataPortableLoops).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "kernels/shared/pool_layout.h"
#include "kernels/twin/index_loop.h"
#include "kernels/twin/pool.h"

namespace ampc::kernels::twin {
namespace {

// Per spatial dimension (innermost last; fewer than three: the leading slots stay 1).
struct Dim {
  int64_t image, kernel, stride, dilation, pad, pad_end;
  bool ceil = false;
};

PoolGeometry geometry(const std::vector<Dim>& dims) {
  PoolGeometry g;
  const int first = 3 - static_cast<int>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    const Dim& d = dims[i];
    const int s = first + static_cast<int>(i);
    const int64_t span = d.image + d.pad + d.pad_end - ((d.kernel - 1) * d.dilation + 1);
    g.image[s] = d.image;
    g.cols[s] = 1 + (d.ceil ? (span + d.stride - 1) / d.stride : span / d.stride);
    g.kernel[s] = d.kernel;
    g.stride[s] = d.stride;
    g.dilation[s] = d.dilation;
    g.pad[s] = d.pad;
    g.pad_end[s] = d.pad_end;
  }
  return g;
}

uint32_t next(uint32_t& state) {
  state = state * 1664525u + 1013904223u;
  return state >> 8;
}

// Values on a grid of 0.5 in [-3, 3] (ties in most windows; exact in bf16), every seventh a
// NaN where asked.
std::vector<float> tied(int64_t n, uint32_t seed, bool nans) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>(static_cast<int>(next(seed) % 13) - 6) * 0.5f;
    if (nans && i % 7 == 3) v[i] = std::nanf("");
  }
  return v;
}

// Every mantissa bit in use, so that sums of three or more round differently in another order.
std::vector<float> spread(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = (static_cast<float>(next(seed)) / 2097152.0f - 4.0f) * 1.1f;
  return v;
}

// The storage bytes of f32 values: as they are, or their high halves (bf16).
std::vector<uint8_t> stored(const std::vector<float>& v, DType t) {
  const size_t bytes = t == DType::kBFloat16 ? 2 : 4;
  std::vector<uint8_t> out(v.size() * bytes);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    if (bytes == 2) {
      const uint16_t h = static_cast<uint16_t>(u >> 16);
      std::memcpy(&out[i * 2], &h, 2);
    } else {
      std::memcpy(&out[i * 4], &u, 4);
    }
  }
  return out;
}

void expect_same(const std::vector<std::vector<Dim>>& cases, int64_t planes) {
  uint32_t seed = 7;
  for (const auto& dims : cases) {
    const PoolGeometry g = geometry(dims);
    const int64_t img = g.image[0] * g.image[1] * g.image[2];
    const int64_t outputs = g.cols[0] * g.cols[1] * g.cols[2];
    for (DType t : {DType::kFloat32, DType::kBFloat16}) {
      for (bool nans : {false, true}) {
        const auto x = stored(tied(planes * img, seed++, nans), t);
        const auto dy = stored(spread(planes * outputs, seed++), t);
        std::vector<uint8_t> got(x.size(), 0xab), want(x.size(), 0xcd);
        max_pool_grad(t, g, planes, x.data(), dy.data(), got.data());
        shared::pool::run_pool_grad<false>(IndexLoop{}, "", t, g, planes, x.data(), dy.data(),
                                           want.data(), false);
        const std::string what = std::string(dtype_name(t)) + (nans ? " with NaNs" : "") +
                                 ", image " + std::to_string(g.image[0]) + "x" +
                                 std::to_string(g.image[1]) + "x" + std::to_string(g.image[2]) +
                                 ", kernel " + std::to_string(g.kernel[0]) + "x" +
                                 std::to_string(g.kernel[1]) + "x" + std::to_string(g.kernel[2]);
        ASSERT_EQ(got, want) << what;
      }
    }
  }
}

TEST(TwinPoolGrad, MaxPoolGradMatchesThePerElementFunctorBitForBit) {
  const std::vector<std::vector<Dim>> cases = {
      {{16, 3, 2, 1, 1, 1}, {16, 3, 2, 1, 1, 1}},            // ResNet's stem pool
      {{9, 3, 2, 1, 1, 1}, {8, 3, 2, 1, 1, 1}},              // odd sizes
      {{10, 2, 1, 2, 0, 1}, {11, 3, 2, 1, 1, 0, true}},      // dilation, ceil mode
      {{7, 3, 3, 1, 2, 2, true}, {7, 2, 1, 2, 0, 1, true}},  // windows wholly in the padding
      {{6, 6, 1, 1, 0, 0}, {6, 6, 1, 1, 0, 0}},              // one window over the plane
      {{37, 4, 3, 1, 2, 1}},                                 // 1-D
      {{50, 5, 1, 1, 2, 2}},  // 1-D, stride 1: a maximum takes the dy of up to five windows
      {{5, 2, 2, 1, 1, 0}, {6, 3, 1, 2, 2, 1}, {7, 3, 2, 1, 1, 1, true}},  // 3-D
      {{40, 1, 1, 1, 0, 0}, {3, 1, 1, 1, 0, 0}},  // every tap its own window
  };
  expect_same(cases, 3);
}

TEST(TwinPoolGrad, PlanesInParallelMatchThePerElementFunctor) {
  expect_same({{{32, 3, 2, 1, 1, 1}, {32, 3, 2, 1, 1, 1}}}, 64);
}

}  // namespace
}  // namespace ampc::kernels::twin
