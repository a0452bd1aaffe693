// The row-wise, reduction and AMP CUDA kernels (kernels/cuda: softmax, layernorm, the generic
// row ops, cross_entropy, reduce, amp) against their CPU twins (kernels/twin) on random inputs, on
// a GPU machine (every test prints "skipped: no CUDA device" and skips without one). The twins run
// the kernels' partition, reduction order and shared math (kernels/shared), so the results are
// expected to be bit-identical; the tests require fp32 within 1e-5 relative and fp16 / bf16
// within one unit in the last place on top of that, require bit-identical results where no
// transcendental function is involved (AMP ops, Max / Min), and print how many elements were
// bit-identical. One test captures the kernels in a CUDA Graph and replays it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/cuda/amp.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/row_op.h"
#include "kernels/cuda/softmax.h"
#include "kernels/shared/rowwise_fp.h"
#include "kernels/twin/amp.h"
#include "kernels/twin/cross_entropy.h"
#include "kernels/twin/layernorm.h"
#include "kernels/twin/reduce.h"
#include "kernels/twin/row_op.h"
#include "kernels/twin/softmax.h"
#include "tests/gpu/require_device.h"

namespace ampc {
namespace {

namespace sh = kernels::shared;
namespace cu = kernels::cuda;
namespace tw = kernels::twin;

// First statement of every test.
// Skips without a GPU or driver, fails when CUDA is there but unusable.
#define AMPC_REQUIRE_DEVICE() AMPC_REQUIRE_CUDA_DEVICE()

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// Host bytes of a tensor and their device copy.
struct Buffer {
  std::vector<uint8_t> host;
  void* dev = nullptr;
  explicit Buffer(size_t bytes) : host(bytes) {
    if (bytes) {
      EXPECT_EQ(cudaMalloc(&dev, bytes), cudaSuccess);
    }
  }
  ~Buffer() {
    if (dev) cudaFree(dev);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void upload() {
    if (dev) {
      EXPECT_EQ(cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> out(host.size());
    if (dev) {
      EXPECT_EQ(cudaMemcpy(out.data(), dev, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return out;
  }
};

const DType kFloatTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

size_t size_of(DType t) {
  return t == DType::kFloat32 ? 4 : (t == DType::kFloat64 ? 8 : 2);
}

uint32_t next(uint32_t& s) {
  return s = s * 1664525u + 1013904223u;
}

// n random values in [-scale, scale) stored as `dtype`.
std::vector<uint8_t> random_bytes(DType dtype, size_t n, uint32_t seed, float scale) {
  std::vector<uint8_t> b(n * size_of(dtype));
  for (size_t i = 0; i < n; ++i) {
    const float v = (static_cast<float>(next(seed) >> 8) / 16777216.0f * 2.0f - 1.0f) * scale;
    if (dtype == DType::kFloat32) std::memcpy(&b[i * 4], &v, 4);
    if (dtype == DType::kFloat64) {
      const double d = v;
      std::memcpy(&b[i * 8], &d, 8);
    }
    const uint16_t h = dtype == DType::kFloat16 ? sh::round_half(v).bits : sh::round_bf16(v).bits;
    if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) std::memcpy(&b[i * 2], &h, 2);
  }
  return b;
}

double value_at(const std::vector<uint8_t>& b, DType dtype, size_t i) {
  if (dtype == DType::kFloat64) {
    double d;
    std::memcpy(&d, &b[i * 8], 8);
    return d;
  }
  if (dtype == DType::kFloat32) {
    float f;
    std::memcpy(&f, &b[i * 4], 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, &b[i * 2], 2);
  return dtype == DType::kFloat16 ? sh::load_half(Half{h}) : sh::load_bf16(BFloat16{h});
}

void set_value(std::vector<uint8_t>& b, DType dtype, size_t i, float v) {
  if (dtype == DType::kFloat32) return (void)std::memcpy(&b[i * 4], &v, 4);
  const uint16_t h = dtype == DType::kFloat16 ? sh::round_half(v).bits : sh::round_bf16(v).bits;
  std::memcpy(&b[i * 2], &h, 2);
}

double ulp_of(DType dtype, double v) {
  const int bits = dtype == DType::kFloat16 ? 10 : (dtype == DType::kBFloat16 ? 7 : 0);
  if (bits == 0) return 0;
  const double a = std::max(std::abs(v), dtype == DType::kFloat16 ? 6.103515625e-05 : 1e-30);
  return std::ldexp(1.0, std::ilogb(a) - bits);
}

// Kernel output vs twin output: within tolerance everywhere (bit-identical when `exact`).
void expect_agree(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, DType dtype,
                  double floor, bool exact, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const size_t n = got.size() / size_of(dtype), w = size_of(dtype);
  size_t same = 0;
  int failures = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&got[i * w], &want[i * w], w) == 0) {
      ++same;
      continue;
    }
    const double g = value_at(got, dtype, i), t = value_at(want, dtype, i);
    const double tol = 1e-5 * std::max(std::abs(t), floor) + ulp_of(dtype, t);
    const bool ok = !exact && (std::isnan(t) ? std::isnan(g) : std::abs(g - t) <= tol);
    if (!ok && failures++ < 5) {
      ADD_FAILURE() << what << " element " << i << ": kernel " << g << ", twin " << t;
    }
  }
  std::printf("%s: %zu of %zu bit-identical\n", what.c_str(), same, n);
}

// ---- Softmax ----

TEST(KernelsRowwiseGpu, SoftmaxMatchesTwin) {
  AMPC_REQUIRE_DEVICE();
  struct Case {
    int64_t outer, n, inner;
  };
  const Case cases[] = {{300, 33, 1},  {64, 1024, 1}, {33, 1030, 1},
                        {8, 50257, 1}, {16, 17, 40},  {3, 5000, 2}};
  for (DType dtype : kFloatTypes) {
    for (const Case& c : cases) {
      for (bool log : {false, true}) {
        const size_t count = static_cast<size_t>(c.outer * c.n * c.inner);
        Buffer x(count * size_of(dtype)), y(count * size_of(dtype));
        x.host = random_bytes(dtype, count, 7 + static_cast<uint32_t>(count), 8.0f);
        set_value(x.host, dtype, 3, 80.0f);  // the others underflow to 0 in that row
        set_value(x.host, dtype, 5, -INFINITY);
        set_value(x.host, dtype, count - 1, -120.0f);
        x.upload();
        cu::softmax(dtype, x.dev, y.dev, c.outer, c.n, c.inner, log, nullptr);
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<uint8_t> want(count * size_of(dtype));
        tw::softmax(dtype, x.host.data(), want.data(), c.outer, c.n, c.inner, log);
        expect_agree(y.download(), want, dtype, log ? 1.0 : 0.0, false,
                     std::string(log ? "log_softmax " : "softmax ") +
                         std::string(dtype_name(dtype)) + " [" + std::to_string(c.outer) + "," +
                         std::to_string(c.n) + "," + std::to_string(c.inner) + "]");
      }
    }
  }
}

// The backward (ampc.SoftmaxGrad) from a forward's output: warp rows, cached and streamed block
// rows, a row of one element, columns (inner > 1); with f32 Y also a 16-bit dY read widened
// (passes/widened_row_grads.h). The sum's order is the twin's and every step is correctly
// rounded, so the two agree bit for bit except where exp differs (log-softmax).
TEST(KernelsRowwiseGpu, SoftmaxGradMatchesTwin) {
  AMPC_REQUIRE_DEVICE();
  struct Case {
    int64_t outer, n, inner;
  };
  const Case cases[] = {{300, 33, 1},  {64, 1024, 1}, {33, 1030, 1},
                        {8, 50257, 1}, {40, 1, 1},    {16, 17, 40}};
  for (DType dtype : kFloatTypes) {
    for (DType dy_type : kFloatTypes) {
      if (dy_type != dtype && dtype != DType::kFloat32) continue;
      for (const Case& c : cases) {
        for (bool log : {false, true}) {
          const size_t count = static_cast<size_t>(c.outer * c.n * c.inner);
          Buffer x(count * size_of(dtype)), y(count * size_of(dtype)), dy(count * size_of(dy_type)),
              dx(count * size_of(dtype));
          x.host = random_bytes(dtype, count, 17 + static_cast<uint32_t>(count), 4.0f);
          dy.host = random_bytes(dy_type, count, 29 + static_cast<uint32_t>(count), 1.0f);
          std::vector<uint8_t> forward(count * size_of(dtype));
          tw::softmax(dtype, x.host.data(), forward.data(), c.outer, c.n, c.inner, log);
          y.host = forward;
          y.upload();
          dy.upload();
          cu::softmax_grad(dtype, dy_type, y.dev, dy.dev, dx.dev, c.outer, c.n, c.inner, log,
                           nullptr);
          CUDA_OK(cudaDeviceSynchronize());
          std::vector<uint8_t> want(count * size_of(dtype));
          tw::softmax_grad(dtype, dy_type, y.host.data(), dy.host.data(), want.data(), c.outer, c.n,
                           c.inner, log);
          expect_agree(dx.download(), want, dtype, 1.0, !log,
                       std::string(log ? "log_softmax_grad " : "softmax_grad ") +
                           std::string(dtype_name(dtype)) + " dY " +
                           std::string(dtype_name(dy_type)) + " [" + std::to_string(c.outer) + "," +
                           std::to_string(c.n) + "," + std::to_string(c.inner) + "]");
        }
      }
    }
  }
}

// ---- The generic row ops (kernels/shared/row_ops.h) ----

// Every op of the list, bit for bit: the specs use only correctly rounded operations (add,
// mul, div, sqrt) in the twin's order. Warp rows (33), cached block rows with and without
// 4-element chunks (1024, 1030), streamed block rows of 256 and 512 threads (9000, 20000),
// columns (inner > 1), and in place; ops with per-channel operands (InstanceNormalization's
// scale and bias) get 3 channels of f32 values (row r reads entry r % 3).
TEST(KernelsRowwiseGpu, RowOpsMatchTwinBitForBit) {
  AMPC_REQUIRE_DEVICE();
  struct Case {
    int64_t outer, n, inner;
  };
  const Case cases[] = {{300, 33, 1}, {64, 1024, 1}, {33, 1030, 1},
                        {5, 9000, 1}, {3, 20000, 1}, {16, 17, 40}};
  constexpr int64_t kChannels = 3;
  Buffer first(kChannels * 4), second(kChannels * 4);
  first.host = random_bytes(DType::kFloat32, kChannels, 23, 1.0f);
  second.host = random_bytes(DType::kFloat32, kChannels, 29, 0.5f);
  first.upload();
  second.upload();
  sh::RowOperands on_device, on_host;
  on_device.channels = on_host.channels = kChannels;
  on_device.data[0] = first.dev;
  on_device.data[1] = second.dev;
  on_host.data[0] = first.host.data();
  on_host.data[1] = second.host.data();
  for (sh::RowOp op : sh::kRowOps) {
    for (DType dtype : kFloatTypes) {
      for (const Case& c : cases) {
        for (const sh::RowArgs args : {sh::RowArgs{1e-5f, 1}, sh::RowArgs{1e-3f, 2}}) {
          const size_t count = static_cast<size_t>(c.outer * c.n * c.inner);
          Buffer x(count * size_of(dtype)), y(count * size_of(dtype));
          x.host = random_bytes(dtype, count, 11 + static_cast<uint32_t>(count), 4.0f);
          x.upload();
          cu::row_op(op, dtype, x.dev, y.dev, c.outer, c.n, c.inner, args, on_device, nullptr);
          CUDA_OK(cudaDeviceSynchronize());
          std::vector<uint8_t> want(count * size_of(dtype));
          tw::row_op(op, dtype, x.host.data(), want.data(), c.outer, c.n, c.inner, args, on_host);
          const std::string what = "row op " + std::to_string(static_cast<int>(op)) + " args " +
                                   std::to_string(args.p) + " " + std::string(dtype_name(dtype)) +
                                   " [" + std::to_string(c.outer) + "," + std::to_string(c.n) +
                                   "," + std::to_string(c.inner) + "]";
          expect_agree(y.download(), want, dtype, 0.0, true, what);
          cu::row_op(op, dtype, x.dev, x.dev, c.outer, c.n, c.inner, args, on_device,
                     nullptr);  // in place
          CUDA_OK(cudaDeviceSynchronize());
          expect_agree(x.download(), want, dtype, 0.0, true, what + " in place");
        }
      }
    }
  }
}

// ---- LayerNormalization ----

TEST(KernelsRowwiseGpu, LayerNormMatchesTwin) {
  AMPC_REQUIRE_DEVICE();
  const int64_t shapes[][2] = {{257, 40}, {64, 768}, {16, 2048}, {4, 20001}, {3, 1}};
  for (DType dtype : kFloatTypes) {
    for (const auto& s : shapes) {
      const int64_t rows = s[0], cols = s[1];
      const size_t count = static_cast<size_t>(rows * cols);
      Buffer x(count * size_of(dtype)), y(count * size_of(dtype));
      Buffer scale(cols * 4), bias(cols * 4), mean(rows * 4), inv(rows * 4);
      x.host = random_bytes(dtype, count, 3, 2.0f);
      scale.host = random_bytes(DType::kFloat32, cols, 5, 1.0f);
      bias.host = random_bytes(DType::kFloat32, cols, 9, 0.5f);
      x.upload();
      scale.upload();
      bias.upload();
      cu::layer_norm(dtype, x.dev, rows, cols, DType::kFloat32, scale.dev, bias.dev, 1e-5f, y.dev,
                     DType::kFloat32, mean.dev, inv.dev, nullptr);
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<uint8_t> wy(count * size_of(dtype)), wm(rows * 4), wi(rows * 4);
      tw::layer_norm(dtype, x.host.data(), rows, cols, DType::kFloat32, scale.host.data(),
                     bias.host.data(), 1e-5f, wy.data(), DType::kFloat32, wm.data(), wi.data());
      const std::string what = "layer_norm " + std::string(dtype_name(dtype)) + " [" +
                               std::to_string(rows) + "," + std::to_string(cols) + "]";
      expect_agree(y.download(), wy, dtype, 1.0, false, what + " Y");
      expect_agree(mean.download(), wm, DType::kFloat32, 1.0, false, what + " Mean");
      expect_agree(inv.download(), wi, DType::kFloat32, 0.0, false, what + " InvStdDev");
    }
  }
  // 16-bit parameters without bias, bf16 statistics, y in place of x.
  const int64_t rows = 100, cols = 3000;
  const DType t = DType::kFloat16, st = DType::kBFloat16;
  Buffer x(rows * cols * 2), scale(cols * 2), mean(rows * 2), inv(rows * 2);
  x.host = random_bytes(t, rows * cols, 11, 4.0f);
  scale.host = random_bytes(t, cols, 13, 1.0f);
  x.upload();
  scale.upload();
  cu::layer_norm(t, x.dev, rows, cols, t, scale.dev, nullptr, 1e-3f, x.dev, st, mean.dev, inv.dev,
                 nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> wy(rows * cols * 2), wm(rows * 2), wi(rows * 2);
  tw::layer_norm(t, x.host.data(), rows, cols, t, scale.host.data(), nullptr, 1e-3f, wy.data(), st,
                 wm.data(), wi.data());
  expect_agree(x.download(), wy, t, 1.0, false, "layer_norm f16 in place, f16 scale, no bias");
  expect_agree(mean.download(), wm, st, 1.0, false, "layer_norm bf16 Mean");
  expect_agree(inv.download(), wi, st, 0.0, false, "layer_norm bf16 InvStdDev");
}

// The backward (ampc.LayerNormalizationGrad): warp rows, block rows of 256 and 512 threads, rows
// of one element, a row count with a partial last chunk and one with the most chunks, with f32 X
// also a 16-bit dY read widened; then 16-bit X with 16-bit scale and only the parameter
// gradients, and dX alone.
TEST(KernelsRowwiseGpu, LayerNormGradMatchesTwin) {
  AMPC_REQUIRE_DEVICE();
  const int64_t shapes[][2] = {{257, 40}, {64, 768}, {16, 2048}, {4, 20001}, {3, 1}, {5000, 64}};
  for (DType dtype : kFloatTypes) {
    for (DType dy_type : kFloatTypes) {
      if (dy_type != dtype && dtype != DType::kFloat32) continue;  // 16-bit dY read widened
      for (const auto& s : shapes) {
        const int64_t rows = s[0], cols = s[1];
        const size_t count = static_cast<size_t>(rows * cols),
                     ws_bytes = tw::layer_norm_grad_workspace_bytes(dtype, rows, cols);
        Buffer x(count * size_of(dtype)), dy(count * size_of(dy_type)), dx(count * size_of(dtype));
        Buffer scale(cols * 4), dscale(cols * 4), dbias(cols * 4), ws(ws_bytes);
        x.host = random_bytes(dtype, count, 3, 2.0f);
        dy.host = random_bytes(dy_type, count, 7, 1.0f);
        scale.host = random_bytes(DType::kFloat32, cols, 5, 1.0f);
        x.upload();
        dy.upload();
        scale.upload();
        cu::layer_norm_grad(dtype, dy_type, x.dev, dy.dev, rows, cols, DType::kFloat32, scale.dev,
                            1e-5f, dx.dev, dscale.dev, dbias.dev, ws.dev, nullptr);
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<uint8_t> wdx(count * size_of(dtype)), wds(cols * 4), wdb(cols * 4),
            wws(ws_bytes);
        tw::layer_norm_grad(dtype, dy_type, x.host.data(), dy.host.data(), rows, cols,
                            DType::kFloat32, scale.host.data(), 1e-5f, wdx.data(), wds.data(),
                            wdb.data(), wws.data());
        const std::string what = "layer_norm_grad " + std::string(dtype_name(dtype)) + " dY " +
                                 std::string(dtype_name(dy_type)) + " [" + std::to_string(rows) +
                                 "," + std::to_string(cols) + "]";
        expect_agree(dx.download(), wdx, dtype, 1.0, false, what + " dX");
        expect_agree(dscale.download(), wds, DType::kFloat32, 1.0, false, what + " dScale");
        expect_agree(dbias.download(), wdb, DType::kFloat32, 0.0, true, what + " dB");
      }
    }
  }
  const int64_t rows = 100, cols = 3000;
  const DType t = DType::kBFloat16;
  const size_t ws_bytes = tw::layer_norm_grad_workspace_bytes(t, rows, cols);
  Buffer x(rows * cols * 2), dy(rows * cols * 2), dx(rows * cols * 2), scale(cols * 2),
      dscale(cols * 2), dbias(cols * 2), ws(ws_bytes);
  x.host = random_bytes(t, rows * cols, 11, 4.0f);
  dy.host = random_bytes(t, rows * cols, 12, 1.0f);
  scale.host = random_bytes(t, cols, 13, 1.0f);
  x.upload();
  dy.upload();
  scale.upload();
  cu::layer_norm_grad(t, t, x.dev, dy.dev, rows, cols, t, scale.dev, 1e-3f, nullptr, dscale.dev,
                      dbias.dev, ws.dev, nullptr);
  cu::layer_norm_grad(t, t, x.dev, dy.dev, rows, cols, t, scale.dev, 1e-3f, dx.dev, nullptr,
                      nullptr, ws.dev, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> wdx(rows * cols * 2), wds(cols * 2), wdb(cols * 2), wws(ws_bytes);
  tw::layer_norm_grad(t, t, x.host.data(), dy.host.data(), rows, cols, t, scale.host.data(), 1e-3f,
                      wdx.data(), wds.data(), wdb.data(), wws.data());
  expect_agree(dx.download(), wdx, t, 1.0, false, "layer_norm_grad bf16 dX alone");
  expect_agree(dscale.download(), wds, t, 1.0, false, "layer_norm_grad bf16 dScale");
  expect_agree(dbias.download(), wdb, t, 0.0, true, "layer_norm_grad bf16 dB");
}

// ---- SoftmaxCrossEntropyLoss ----

TEST(KernelsRowwiseGpu, CrossEntropyMatchesTwin) {
  AMPC_REQUIRE_DEVICE();
  struct Case {
    int64_t n, c, d;
    tw::CeReduction red;
    bool weight, ignore;
  };
  const Case cases[] = {{4096, 50257, 1, tw::CeReduction::kMean, false, true},
                        {300, 10, 1, tw::CeReduction::kSum, true, false},
                        {300, 10, 1, tw::CeReduction::kNone, true, true},
                        {8, 21, 64, tw::CeReduction::kMean, true, true},
                        {64, 2000, 1, tw::CeReduction::kMean, false, false}};
  // widened: 16-bit scores read as float, float outputs (ampc.SoftmaxCrossEntropyLoss).
  for (DType dtype : kFloatTypes) {
    for (const bool widened : {false, true}) {
      if (widened && dtype == DType::kFloat32) continue;
      const DType out = widened ? DType::kFloat32 : dtype;
      for (const Case& c : cases) {
        if (widened && c.c > 10000) continue;  // the GPT-sized row: once per type is enough
        const size_t count = static_cast<size_t>(c.n * c.c * c.d), positions = c.n * c.d;
        const size_t loss_count = c.red == tw::CeReduction::kNone ? positions : 1;
        Buffer x(count * size_of(dtype)), labels(positions * 8), weight(c.c * 4),
            loss(loss_count * size_of(out)), log_prob(count * size_of(out));
        Buffer ws(cu::softmax_cross_entropy_workspace_bytes(c.n, c.c, c.d, c.red));
        x.host = random_bytes(dtype, count, 17, 4.0f);
        for (size_t p = 0; p < positions; ++p) {
          const int64_t label = static_cast<int64_t>((p * 7919 + 3) % c.c);
          std::memcpy(&labels.host[p * 8], &label, 8);
        }
        weight.host = random_bytes(DType::kFloat32, c.c, 23, 0.5f);
        for (int64_t k = 0; k < c.c; ++k) {
          float w;
          std::memcpy(&w, &weight.host[k * 4], 4);
          w += 1.0f;
          std::memcpy(&weight.host[k * 4], &w, 4);
        }
        x.upload();
        labels.upload();
        weight.upload();
        cu::softmax_cross_entropy(dtype, x.dev, DType::kInt64, labels.dev, c.n, c.c, c.d,
                                  DType::kFloat32, c.weight ? weight.dev : nullptr, c.ignore, 3,
                                  c.red, loss.dev, log_prob.dev, ws.dev, nullptr, nullptr, out);
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<uint8_t> wl(loss.host.size()), wp(log_prob.host.size()),
            wws(ws.host.size() + 8);
        tw::softmax_cross_entropy(dtype, x.host.data(), DType::kInt64, labels.host.data(), c.n, c.c,
                                  c.d, DType::kFloat32, c.weight ? weight.host.data() : nullptr,
                                  c.ignore, 3, c.red, wl.data(), wp.data(), wws.data(), nullptr,
                                  out);
        const std::string what = "cross_entropy " + std::string(dtype_name(dtype)) +
                                 (widened ? " widened" : "") + " [" + std::to_string(c.n) + "," +
                                 std::to_string(c.c) + "," + std::to_string(c.d) + "] reduction " +
                                 std::to_string(static_cast<int>(c.red));
        expect_agree(loss.download(), wl, out, 1.0, false, what + " loss");
        expect_agree(log_prob.download(), wp, out, 1.0, false, what + " log_prob");
      }
    }
  }
}

// A label out of range: NaN there (as the twin) and the device flag set, as the twin sets its
// own; in range: the flag stays 0.
TEST(KernelsRowwiseGpu, CrossEntropyFlagsLabelsOutOfRange) {
  AMPC_REQUIRE_DEVICE();
  const int64_t n = 64, c = 10;
  for (bool bad : {false, true}) {
    Buffer x(n * c * 4), labels(n * 8), loss(4), flag(4);
    Buffer ws(cu::softmax_cross_entropy_workspace_bytes(n, c, 1, tw::CeReduction::kMean));
    x.host = random_bytes(DType::kFloat32, n * c, 5, 2.0f);
    for (int64_t p = 0; p < n; ++p) {
      const int64_t label = bad && p == 17 ? c + 3 : p % c;
      std::memcpy(&labels.host[p * 8], &label, 8);
    }
    std::fill(flag.host.begin(), flag.host.end(), 0);
    x.upload();
    labels.upload();
    flag.upload();
    cu::softmax_cross_entropy(DType::kFloat32, x.dev, DType::kInt64, labels.dev, n, c, 1,
                              DType::kFloat32, nullptr, false, 0, tw::CeReduction::kMean, loss.dev,
                              nullptr, ws.dev, nullptr, static_cast<int32_t*>(flag.dev));
    CUDA_OK(cudaDeviceSynchronize());
    int32_t want_flag = 0, got_flag = 0;
    std::vector<uint8_t> wl(4), wws(ws.host.size() + 8);
    tw::softmax_cross_entropy(DType::kFloat32, x.host.data(), DType::kInt64, labels.host.data(), n,
                              c, 1, DType::kFloat32, nullptr, false, 0, tw::CeReduction::kMean,
                              wl.data(), nullptr, wws.data(), &want_flag);
    const std::vector<uint8_t> got = flag.download();
    std::memcpy(&got_flag, got.data(), 4);
    EXPECT_EQ(want_flag, bad ? 1 : 0);
    EXPECT_EQ(got_flag, want_flag) << (bad ? "a bad label" : "good labels");
    float got_loss = 0;
    const std::vector<uint8_t> l = loss.download();
    std::memcpy(&got_loss, l.data(), 4);
    EXPECT_EQ(std::isnan(got_loss), bad);
  }
}

// ---- Reductions ----

TEST(KernelsRowwiseGpu, ReductionsMatchTwin) {
  AMPC_REQUIRE_DEVICE();
  struct Case {
    std::vector<int64_t> dims;
    std::vector<bool> reduced;
  };
  const std::vector<Case> cases = {{{300, 50}, {false, true}},
                                   {{3, 400000}, {false, true}},
                                   {{1, 10000000}, {false, true}},
                                   {{4096, 768}, {true, false}},
                                   {{16, 30, 700}, {false, true, false}},
                                   {{8, 30, 7, 5}, {true, false, true, false}},
                                   {{64, 4096}, {false, true}},
                                   {{5, 6, 7}, {true, true, true}},
                                   // per channel: the conv bias gradient, rows in pieces
                                   {{64, 16, 28, 28}, {true, false, true, true}},
                                   {{2, 3, 70000}, {true, false, true}}};
  for (DType dtype : kFloatTypes) {
    for (const Case& c : cases) {
      const int rank = static_cast<int>(c.dims.size());
      bool reduced[8] = {};
      size_t count = 1, out_count = 1;
      int64_t n = 1;
      for (int i = 0; i < rank; ++i) {
        reduced[i] = c.reduced[i];
        count *= static_cast<size_t>(c.dims[i]);
        if (reduced[i])
          n *= c.dims[i];
        else
          out_count *= static_cast<size_t>(c.dims[i]);
      }
      Buffer x(count * size_of(dtype)), y(out_count * size_of(dtype));
      x.host = random_bytes(dtype, count, 29 + static_cast<uint32_t>(count), 2.0f);
      x.upload();
      for (int op = 0; op <= 8; ++op) {
        if (op == 2 || op == 7) continue;  // Prod, LogSum: random inputs over- / underflow
        const auto rop = static_cast<cu::ReduceOp>(op);
        Buffer ws(cu::reduce_workspace_bytes(rop, dtype, rank, c.dims.data(), reduced));
        cu::reduce(rop, dtype, x.dev, y.dev, rank, c.dims.data(), reduced, ws.dev, nullptr);
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<uint8_t> want(y.host.size()), wws(ws.host.size() + 8);
        tw::reduce(static_cast<tw::ReduceOp>(op), dtype, x.host.data(), want.data(), rank,
                   c.dims.data(), reduced, wws.data());
        const double floor = op == 1 ? 1.0 : 2.0 * static_cast<double>(n);
        expect_agree(y.download(), want, dtype, floor, op == 3 || op == 4,
                     "reduce op " + std::to_string(op) + " " + std::string(dtype_name(dtype)) +
                         " of " + std::to_string(count) + " to " + std::to_string(out_count));
      }
    }
  }
}

// ---- The loss scaler's ops ----

struct Grads {
  std::vector<DType> dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                               DType::kFloat32};
  std::vector<int64_t> numels = {1000003, 40000, 777, 33, 0};
  std::vector<std::unique_ptr<Buffer>> in, out;
  Grads(uint32_t seed, float scale) {
    for (size_t j = 0; j < dtypes.size(); ++j) {
      in.push_back(std::make_unique<Buffer>(numels[j] * size_of(dtypes[j])));
      out.push_back(std::make_unique<Buffer>(numels[j] * size_of(dtypes[j])));
      in[j]->host = random_bytes(dtypes[j], numels[j], seed + j, scale);
      in[j]->upload();
    }
  }
  std::vector<const void*> dev_in() const {
    std::vector<const void*> v;
    for (const auto& b : in) v.push_back(b->dev);
    return v;
  }
  std::vector<void*> dev_out() const {
    std::vector<void*> v;
    for (const auto& b : out) v.push_back(b->dev);
    return v;
  }
  std::vector<const void*> host_in() const {
    std::vector<const void*> v;
    for (const auto& b : in) v.push_back(b->host.data());
    return v;
  }
};

TEST(KernelsRowwiseGpu, UnscaleCheckAndUpdateScaleMatchTwinBitForBit) {
  AMPC_REQUIRE_DEVICE();
  for (bool inject : {false, true}) {
    Grads g(41, 1000.0f);
    if (inject) {  // a bf16 inf in the middle of the third tensor
      const uint16_t inf = 0x7f80;
      std::memcpy(&g.in[2]->host[400 * 2], &inf, 2);
      g.in[2]->upload();
    }
    const int64_t count = static_cast<int64_t>(g.dtypes.size());
    Buffer inv(4), found(1), scale(4), tracker(4), new_scale(4), new_tracker(4);
    const float inv_v = 1.0f / 65536.0f, scale_v = 65536.0f;
    const int32_t tracker_v = 1999;
    std::memcpy(inv.host.data(), &inv_v, 4);
    std::memcpy(scale.host.data(), &scale_v, 4);
    std::memcpy(tracker.host.data(), &tracker_v, 4);
    inv.upload();
    scale.upload();
    tracker.upload();
    const auto din = g.dev_in();
    const auto dout = g.dev_out();
    cu::unscale_check(count, g.dtypes.data(), din.data(), dout.data(), g.numels.data(), inv.dev,
                      found.dev, nullptr);
    cu::update_scale(scale.dev, tracker.dev, found.dev, 2.0f, 0.5f, 2000, false, 0, false, 0,
                     new_scale.dev, new_tracker.dev, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<std::vector<uint8_t>> want;
    std::vector<void*> hout;
    for (size_t j = 0; j < g.dtypes.size(); ++j) want.emplace_back(g.out[j]->host.size());
    for (auto& w : want) hout.push_back(w.data());
    const auto hin = g.host_in();
    bool want_found = !inject;
    tw::unscale_check(count, g.dtypes.data(), hin.data(), hout.data(), g.numels.data(), &inv_v,
                      &want_found);
    EXPECT_EQ(want_found, inject);
    EXPECT_EQ(found.download()[0], want_found ? 1 : 0);
    for (size_t j = 0; j < g.dtypes.size(); ++j)
      expect_agree(g.out[j]->download(), want[j], g.dtypes[j], 0.0, true,
                   "unscale_check tensor " + std::to_string(j));
    float ws_scale;
    int32_t ws_tracker;
    tw::update_scale(&scale_v, &tracker_v, &want_found, 2.0f, 0.5f, 2000, false, 0, false, 0,
                     &ws_scale, &ws_tracker);
    float got_scale;
    int32_t got_tracker;
    std::memcpy(&got_scale, new_scale.download().data(), 4);
    std::memcpy(&got_tracker, new_tracker.download().data(), 4);
    EXPECT_EQ(got_scale, ws_scale);
    EXPECT_EQ(got_tracker, ws_tracker);
  }
}

TEST(KernelsRowwiseGpu, ClipGradNormMatchesTwin) {
  AMPC_REQUIRE_DEVICE();
  Grads g(77, 0.01f);
  const int64_t count = static_cast<int64_t>(g.dtypes.size());
  for (bool clip : {false, true}) {
    Buffer total(4), ws(cu::clip_grad_norm_workspace_bytes(count, g.numels.data()));
    const auto din = g.dev_in();
    const auto dout = g.dev_out();
    cu::clip_grad_norm(count, g.dtypes.data(), din.data(), dout.data(), g.numels.data(), clip, 0.5f,
                       total.dev, ws.dev, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<std::vector<uint8_t>> want;
    std::vector<void*> hout;
    for (size_t j = 0; j < g.dtypes.size(); ++j) want.emplace_back(g.out[j]->host.size());
    for (auto& w : want) hout.push_back(w.data());
    const auto hin = g.host_in();
    std::vector<double> wws(ws.host.size() / 8 + 1);
    float want_total = 0;
    tw::clip_grad_norm(count, g.dtypes.data(), hin.data(), hout.data(), g.numels.data(), clip, 0.5f,
                       &want_total, wws.data());
    float got_total;
    std::memcpy(&got_total, total.download().data(), 4);
    EXPECT_EQ(sh::to_bits(got_total), sh::to_bits(want_total)) << got_total << " vs " << want_total;
    if (!clip) continue;
    for (size_t j = 0; j < g.dtypes.size(); ++j)
      expect_agree(g.out[j]->download(), want[j], g.dtypes[j], 0.0, true,
                   "clip_grad_norm tensor " + std::to_string(j));
  }
}

// More tensors than one launch's table holds (48): the tables' chunk and tensor offsets.
TEST(KernelsRowwiseGpu, ManyTensorsSpanSeveralTables) {
  AMPC_REQUIRE_DEVICE();
  const int count = 130;
  std::vector<DType> dtypes;
  std::vector<int64_t> numels;
  std::vector<std::unique_ptr<Buffer>> in, out;
  for (int j = 0; j < count; ++j) {
    dtypes.push_back(kFloatTypes[j % 3]);
    numels.push_back(j % 7 == 0 ? 0 : 1 + (j * 2741) % 40000);
    in.push_back(std::make_unique<Buffer>(numels[j] * size_of(dtypes[j])));
    out.push_back(std::make_unique<Buffer>(numels[j] * size_of(dtypes[j])));
    in[j]->host = random_bytes(dtypes[j], numels[j], 100 + j, 3.0f);
    in[j]->upload();
  }
  std::vector<const void*> din, hin;
  std::vector<void*> dout, hout;
  std::vector<std::vector<uint8_t>> want;
  for (int j = 0; j < count; ++j) want.emplace_back(out[j]->host.size());
  for (int j = 0; j < count; ++j) {
    din.push_back(in[j]->dev);
    dout.push_back(out[j]->dev);
    hin.push_back(in[j]->host.data());
    hout.push_back(want[j].data());
  }
  Buffer total(4), ws(cu::clip_grad_norm_workspace_bytes(count, numels.data()));
  cu::clip_grad_norm(count, dtypes.data(), din.data(), dout.data(), numels.data(), true, 1.0f,
                     total.dev, ws.dev, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<double> wws(ws.host.size() / 8 + 1);
  float want_total = 0;
  tw::clip_grad_norm(count, dtypes.data(), hin.data(), hout.data(), numels.data(), true, 1.0f,
                     &want_total, wws.data());
  float got_total;
  std::memcpy(&got_total, total.download().data(), 4);
  EXPECT_EQ(sh::to_bits(got_total), sh::to_bits(want_total)) << got_total << " vs " << want_total;
  for (int j = 0; j < count; ++j)
    expect_agree(out[j]->download(), want[j], dtypes[j], 0.0, true,
                 "clip_grad_norm of 130, tensor " + std::to_string(j));
  // The last tensor's inf must be found through the third table.
  const uint16_t inf = dtypes[count - 1] == DType::kFloat16 ? 0x7c00 : 0x7f80;
  if (dtypes[count - 1] == DType::kFloat32) {
    const float f = INFINITY;
    std::memcpy(in[count - 1]->host.data(), &f, 4);
  } else {
    std::memcpy(in[count - 1]->host.data(), &inf, 2);
  }
  in[count - 1]->upload();
  Buffer inv(4), found(1);
  const float inv_v = 0.25f;
  std::memcpy(inv.host.data(), &inv_v, 4);
  inv.upload();
  cu::unscale_check(count, dtypes.data(), din.data(), dout.data(), numels.data(), inv.dev,
                    found.dev, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(found.download()[0], 1);
}

// ---- CUDA Graph capture: no allocation, synchronisation or host read inside ----

TEST(KernelsRowwiseGpu, KernelsCaptureInACudaGraph) {
  AMPC_REQUIRE_DEVICE();
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int64_t rows = 512, cols = 768;
  const size_t count = rows * cols;
  const DType t = DType::kFloat16;
  Buffer x(count * 2), y(count * 2), sum(cols * 4), inv(4), found(1), scale(4), tracker(4);
  x.host = random_bytes(t, count, 5, 3.0f);
  x.upload();
  const float inv_v = 0.5f, scale_v = 2.0f;
  const int32_t tracker_v = 0;
  std::memcpy(inv.host.data(), &inv_v, 4);
  std::memcpy(scale.host.data(), &scale_v, 4);
  std::memcpy(tracker.host.data(), &tracker_v, 4);
  inv.upload();
  scale.upload();
  tracker.upload();
  const int64_t dims[2] = {rows, cols};
  const bool reduced[2] = {true, false};
  Buffer ws(cu::reduce_workspace_bytes(cu::ReduceOp::kSum, t, 2, dims, reduced));
  const DType gt = DType::kFloat32;
  const int64_t gn = cols;
  const void* gin = sum.dev;
  void* gout = sum.dev;

  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cu::softmax(t, x.dev, y.dev, rows, cols, 1, false, stream);
  // Row softmax, its column sums written over x's first row (the second replay reads them),
  // an unscale of an fp32 buffer, the scale update in place.
  cu::reduce(cu::ReduceOp::kSum, t, y.dev, x.dev, 2, dims, reduced, ws.dev, stream);
  cu::unscale_check(1, &gt, &gin, &gout, &gn, inv.dev, found.dev, stream);
  cu::update_scale(scale.dev, tracker.dev, found.dev, 2.0f, 0.5f, 1, false, 0, false, 0, scale.dev,
                   tracker.dev, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaMemsetAsync(sum.dev, 0, cols * 4, stream));
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));

  // Twin of the same sequence, twice (x is overwritten by the column sums after the first).
  std::vector<uint8_t> hx = x.host, hy(count * 2);
  std::vector<uint8_t> hws(ws.host.size() + 8);
  std::vector<float> hsum(cols, 0.0f);
  float hscale = scale_v;
  int32_t htracker = tracker_v;
  for (int step = 0; step < 2; ++step) {
    tw::softmax(t, hx.data(), hy.data(), rows, cols, 1, false);
    tw::reduce(tw::ReduceOp::kSum, t, hy.data(), hx.data(), 2, dims, reduced, hws.data());
    bool hfound = false;
    const void* hin = hsum.data();
    void* hout = hsum.data();
    tw::unscale_check(1, &gt, &hin, &hout, &gn, &inv_v, &hfound);
    float s2;
    int32_t t2;
    tw::update_scale(&hscale, &htracker, &hfound, 2.0f, 0.5f, 1, false, 0, false, 0, &s2, &t2);
    hscale = s2;
    htracker = t2;
  }
  const std::vector<uint8_t> gx = x.download();
  expect_agree(std::vector<uint8_t>(gx.begin(), gx.begin() + cols * 2),
               std::vector<uint8_t>(hx.begin(), hx.begin() + cols * 2), t, 1.0, false,
               "captured softmax + column sums");
  float got_scale;
  std::memcpy(&got_scale, scale.download().data(), 4);
  EXPECT_EQ(got_scale, hscale);
  EXPECT_EQ(got_scale, 8.0f);  // grown twice (interval 1, nothing non-finite)
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(KernelsRowwiseGpu, UnsupportedTypesThrow) {
  AMPC_REQUIRE_DEVICE();
  EXPECT_THROW(cu::softmax(DType::kInt32, nullptr, nullptr, 1, 4, 1, false, nullptr), Error);
  EXPECT_THROW(cu::layer_norm(DType::kFloat64, nullptr, 1, 4, DType::kFloat32, nullptr, nullptr,
                              1e-5f, nullptr, DType::kFloat32, nullptr, nullptr, nullptr),
               Error);
  EXPECT_THROW(cu::update_scale(nullptr, nullptr, nullptr, 2, 0.5f, 0, false, 0, false, 0, nullptr,
                                nullptr, nullptr),
               Error);
}

}  // namespace
}  // namespace ampc
