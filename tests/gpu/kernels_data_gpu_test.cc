// The data-movement, elementwise (integer / bool, Cast), Dropout, random-number, pooling and
// BatchNorm CUDA kernels against their CPU twins (kernels/twin) on random inputs, on a device
// (and the fill against the bytes it is given): every result must be the twin's bit for bit
// (the twins run the kernels' per-element code in the kernels' order; ScatterND and every sum
// are deterministic; Dropout's and the random ops' draws are counter-based), except the normal
// draws, which call the platforms' own log and cos (kernels/shared/random_math.h): within one
// unit in the last place of the output type (eight for f64). Three tests also capture launches
// in a CUDA Graph.
// Every test skips, saying so on stdout, without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/half.h"
#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/bias.h"
#include "kernels/cuda/copy.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gather_scatter.h"
#include "kernels/cuda/pad.h"
#include "kernels/cuda/pool.h"
#include "kernels/cuda/random.h"
#include "kernels/shared/elementwise_int.h"
#include "kernels/twin/batchnorm.h"
#include "kernels/twin/bias.h"
#include "kernels/twin/copy.h"
#include "kernels/twin/dropout.h"
#include "kernels/twin/elementwise.h"
#include "kernels/twin/gather_scatter.h"
#include "kernels/twin/pad.h"
#include "kernels/twin/pool.h"
#include "kernels/twin/random.h"
#include "tests/gpu/require_device.h"

namespace ampc {
namespace {

namespace cu = ampc::kernels::cuda;
namespace tw = ampc::kernels::twin;
namespace ew = ampc::kernels::shared::ew;
using Dims = std::vector<int64_t>;

// Skips without a GPU or driver, fails when CUDA is there but unusable.
#define AMPC_REQUIRE_DEVICE() AMPC_REQUIRE_CUDA_DEVICE()

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

int64_t count(const Dims& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Dims contiguous(const Dims& s) {
  Dims st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// Host bytes and a device copy of the same size.
struct Buf {
  std::vector<uint8_t> host;
  void* dev = nullptr;
  explicit Buf(size_t bytes) : host(bytes) {
    if (cudaMalloc(&dev, bytes ? bytes : 1) != cudaSuccess) dev = nullptr;
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  ~Buf() { cudaFree(dev); }
  void upload() { cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice); }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> out(host.size());
    cudaMemcpy(out.data(), dev, out.size(), cudaMemcpyDeviceToHost);
    return out;
  }
  template <typename T>
  T* h() {
    return reinterpret_cast<T*>(host.data());
  }
};

uint32_t next(uint32_t& s) {
  s = s * 1664525u + 1013904223u;
  return s >> 8;
}

// n random values in [lo, hi) stored as dtype t (integers floored, bool by threshold), or
// random bits with `bits`.
void fill(Buf& b, DType t, uint32_t seed, double lo = -4, double hi = 4, bool bits = false) {
  uint32_t s = seed * 2654435761u + 7;
  if (bits) {
    for (uint8_t& x : b.host) x = static_cast<uint8_t>(next(s));
    b.upload();
    return;
  }
  const size_t n = b.host.size() / dtype_size(t);
  for (size_t i = 0; i < n; ++i) {
    const double v = lo + (hi - lo) * (next(s) / 16777216.0);
    switch (t) {
      case DType::kFloat32:
        b.h<float>()[i] = static_cast<float>(v);
        break;
      case DType::kFloat64:
        b.h<double>()[i] = v;
        break;
      case DType::kFloat16:
        b.h<Half>()[i] = ew::cast_value<Half>(static_cast<float>(v));
        break;
      case DType::kBFloat16:
        b.h<BFloat16>()[i] = ew::cast_value<BFloat16>(static_cast<float>(v));
        break;
      case DType::kInt32:
        b.h<int32_t>()[i] = static_cast<int32_t>(std::floor(v));
        break;
      case DType::kInt64:
        b.h<int64_t>()[i] = static_cast<int64_t>(std::floor(v));
        break;
      case DType::kInt8:
        b.h<int8_t>()[i] = static_cast<int8_t>(static_cast<int>(std::floor(v)));
        break;
      case DType::kUInt8:
        b.h<uint8_t>()[i] = static_cast<uint8_t>(static_cast<int>(std::floor(v)));
        break;
      case DType::kBool:
        b.h<bool>()[i] = v > (lo + hi) / 2;
        break;
      default:
        ADD_FAILURE() << "fill: unhandled dtype";
    }
  }
  b.upload();
}

Buf* make(std::vector<std::unique_ptr<Buf>>& keep, DType t, int64_t n) {
  keep.push_back(std::make_unique<Buf>(static_cast<size_t>(n) * dtype_size(t)));
  return keep.back().get();
}

// The device result equals the twin's (host) result byte for byte.
void expect_same(const Buf& out, const std::string& what, size_t element = 1) {
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  const std::vector<uint8_t> got = out.download();
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], out.host[i]) << what << ": element " << i / element;
}

// ---------------------------------------------------------------- copies

TEST(KernelsDataGpu, StridedCopiesMatchTwins) {
  AMPC_REQUIRE_DEVICE();
  std::vector<std::unique_ptr<Buf>> keep;
  struct Case {
    DType t;
    Dims shape, src_strides;
    int64_t src_offset, src_numel;
  };
  const Case cases[] = {
      {DType::kFloat32, {33, 17, 9, 5}, {5, 33 * 9 * 5, 33 * 5, 1}, 0, 33 * 17 * 9 * 5},  // permute
      {DType::kBFloat16, {20, 13}, {-2 * 31, -3}, 39 * 31 + 30, 40 * 31},  // negative steps
      {DType::kFloat32, {64, 96}, {128, 1}, 128 * 3 + 16, 128 * 70},       // rows: 16-byte words
      {DType::kUInt8, {40, 36}, {100, 1}, 7, 100 * 41},                    // rows of 36 bytes
      {DType::kFloat16, {4, 50, 6}, {0, 6, 1}, 0, 300},                    // expand
      {DType::kInt64, {1000003}, {1}, 0, 1000003},                         // one long row
      {DType::kFloat32, {70, 45}, {1, 70}, 0, 70 * 45},                    // transposes (tiles)
      {DType::kFloat16, {3, 40, 7, 33}, {9240, 1, 40, 280}, 0, 3 * 9240},
      {DType::kUInt8, {50, 64}, {1, 50}, 0, 50 * 64},
      {DType::kInt64, {9, 31, 40}, {1, 9, 279}, 0, 40 * 279},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    Buf* src = make(keep, c.t, c.src_numel);
    Buf* dst = make(keep, c.t, count(c.shape));
    fill(*src, c.t, seed++, 0, 0, true);
    tw::strided_copy(c.t, c.shape, src->host.data(), c.src_offset, c.src_strides, dst->host.data(),
                     0, contiguous(c.shape));
    cu::strided_copy(c.t, c.shape, src->dev, c.src_offset, c.src_strides, dst->dev, 0,
                     contiguous(c.shape), nullptr);
    expect_same(*dst, "strided_copy " + std::string(dtype_name(c.t)), dtype_size(c.t));
  }
  // Concat and Split of [3, a_k, 10] f16, contiguous copies aligned and not.
  const Dims sizes = {5, 1, 8};
  std::vector<const void*> ins_h, ins_d;
  for (size_t k = 0; k < sizes.size(); ++k) {
    Buf* in = make(keep, DType::kFloat16, 3 * sizes[k] * 10);
    fill(*in, DType::kFloat16, seed++, 0, 0, true);
    ins_h.push_back(in->host.data());
    ins_d.push_back(in->dev);
  }
  Buf* cat = make(keep, DType::kFloat16, 3 * 14 * 10);
  tw::concat(DType::kFloat16, ins_h, sizes, 3, 10, cat->host.data());
  cu::concat(DType::kFloat16, ins_d, sizes, 3, 10, cat->dev, nullptr);
  expect_same(*cat, "concat", 2);
  std::vector<void*> outs_h, outs_d;
  std::vector<Buf*> outs;
  for (int64_t a : sizes) {
    outs.push_back(make(keep, DType::kFloat16, 3 * a * 10));
    outs_h.push_back(outs.back()->host.data());
    outs_d.push_back(outs.back()->dev);
  }
  tw::split(DType::kFloat16, cat->host.data(), 3, 10, sizes, outs_h);
  cu::split(DType::kFloat16, cat->dev, 3, 10, sizes, outs_d, nullptr);
  for (Buf* o : outs) expect_same(*o, "split", 2);
  for (int64_t shift : {0, 1}) {  // 16-byte words and a tail, or misaligned elements
    Buf* a = make(keep, DType::kUInt16, 100001);
    Buf* b = make(keep, DType::kUInt16, 100001);
    fill(*a, DType::kUInt16, seed++, 0, 0, true);
    CUDA_OK(cudaMemset(b->dev, 0, b->host.size()));
    const int64_t n = 100001 - shift;
    tw::contiguous_copy(DType::kUInt16, a->h<uint16_t>() + shift, b->h<uint16_t>() + shift, n);
    cu::contiguous_copy(DType::kUInt16, static_cast<uint16_t*>(a->dev) + shift,
                        static_cast<uint16_t*>(b->dev) + shift, n, nullptr);
    expect_same(*b, "contiguous_copy", 2);
  }
}

// ConstantOfShape's fill: every element of 1-, 2-, 4- and 8-byte types (an odd count, so
// that no width divides it) holds the value's bytes, as the CPU op's copy of them.
TEST(KernelsDataGpu, FillWritesTheValueInEveryElement) {
  AMPC_REQUIRE_DEVICE();
  for (DType t : {DType::kBool, DType::kBFloat16, DType::kFloat32, DType::kInt64}) {
    const size_t w = dtype_size(t);
    const int64_t n = 100003;
    Buf out(static_cast<size_t>(n) * w);
    std::vector<uint8_t> value(w);
    for (size_t b = 0; b < w; ++b) value[b] = static_cast<uint8_t>(0x3b + 17 * b);
    if (t == DType::kBool) value[0] = 1;
    for (int64_t i = 0; i < n; ++i) std::memcpy(out.h<uint8_t>() + i * w, value.data(), w);
    CUDA_OK(cudaMemset(out.dev, 0, out.host.size()));
    cu::fill(t, value.data(), out.dev, n, nullptr);
    expect_same(out, "fill " + std::string(dtype_name(t)), w);
  }
}

TEST(KernelsDataGpu, PadMatchesTwin) {
  AMPC_REQUIRE_DEVICE();
  std::vector<std::unique_ptr<Buf>> keep;
  const Dims shape = {5, 17, 33}, begin = {2, -3, 4}, end = {1, 5, -6};
  Dims out_shape(3);
  for (int d = 0; d < 3; ++d) out_shape[d] = shape[d] + begin[d] + end[d];
  uint32_t seed = 20;
  for (DType t : {DType::kFloat32, DType::kUInt8, DType::kFloat16, DType::kInt64}) {
    for (cu::PadMode m : {cu::PadMode::kConstant, cu::PadMode::kEdge, cu::PadMode::kReflect}) {
      for (bool with_value : {true, false}) {
        Buf* x = make(keep, t, count(shape));
        Buf* v = make(keep, t, 1);
        Buf* y = make(keep, t, count(out_shape));
        fill(*x, t, seed++, 0, 0, true);
        fill(*v, t, seed++, 0, 0, true);
        tw::pad(t, x->host.data(), shape, begin, end, m, with_value ? v->host.data() : nullptr,
                2.5f, y->host.data());
        cu::pad(t, x->dev, shape, begin, end, m, with_value ? v->dev : nullptr, 2.5f, y->dev,
                nullptr);
        expect_same(*y, "pad " + std::string(dtype_name(t)), dtype_size(t));
      }
    }
  }
}

// ---------------------------------------------------------------- Gather / ScatterND

TEST(KernelsDataGpu, GatherMatchesTwinAndFlagsBadIndices) {
  AMPC_REQUIRE_DEVICE();
  std::vector<std::unique_ptr<Buf>> keep;
  struct Case {
    DType t, it;
    int64_t outer, axis, inner, num;
  };
  const Case cases[] = {{DType::kFloat32, DType::kInt64, 1, 50000, 64, 4096},  // embedding rows
                        {DType::kFloat16, DType::kInt32, 7, 13, 5, 300},
                        {DType::kUInt8, DType::kInt64, 3, 9, 3, 77},
                        {DType::kInt64, DType::kInt32, 11, 4, 1, 50}};
  uint32_t seed = 40;
  for (const Case& c : cases) {
    for (bool bad_indices : {false, true}) {
      Buf* x = make(keep, c.t, c.outer * c.axis * c.inner);
      Buf* idx = make(keep, c.it, c.num);
      Buf* y = make(keep, c.t, c.outer * c.num * c.inner);
      Buf* flag = make(keep, DType::kInt32, 1);
      fill(*x, c.t, seed++, 0, 0, true);
      const double reach = bad_indices ? 1.5 * c.axis : c.axis;
      fill(*idx, c.it, seed++, -reach, reach);
      tw::gather(c.t, x->host.data(), c.outer, c.axis, c.inner, c.it, idx->host.data(), c.num,
                 y->host.data(), flag->h<int32_t>());
      cu::gather(c.t, x->dev, c.outer, c.axis, c.inner, c.it, idx->dev, c.num, y->dev,
                 static_cast<int32_t*>(flag->dev), nullptr);
      expect_same(*y, "gather " + std::string(dtype_name(c.t)), dtype_size(c.t));
      expect_same(*flag, "gather's bad-index flag");
      EXPECT_EQ(flag->h<int32_t>()[0], bad_indices ? 1 : 0);
    }
  }
}

// The convolution's bias (kernels/cuda/bias.h), which the CUDA backend adds itself for every
// precision (cuDNN's cudnnAddTensor does not document bf16), bit for bit.
TEST(KernelsDataGpu, ChannelBiasMatchesTwin) {
  AMPC_REQUIRE_DEVICE();
  std::vector<std::unique_ptr<Buf>> keep;
  uint32_t seed = 90;
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (const Dims& d : {Dims{64, 16, 784}, Dims{3, 5, 1}, Dims{2, 70000, 3}}) {
      Buf* y = make(keep, t, d[0] * d[1] * d[2]);
      Buf* b = make(keep, t, d[1]);
      fill(*y, t, seed++);
      fill(*b, t, seed++);
      cu::add_channel_bias(t, y->dev, b->dev, d[0], d[1], d[2], nullptr);
      tw::add_channel_bias(t, y->host.data(), b->host.data(), d[0], d[1], d[2]);
      expect_same(*y, "channel bias " + std::string(dtype_name(t)), dtype_size(t));
    }
  }
}

TEST(KernelsDataGpu, ScatterNDIsDeterministicAndMatchesTwin) {
  AMPC_REQUIRE_DEVICE();
  std::vector<std::unique_ptr<Buf>> keep;
  // Embedding gradient: [V, D] rows, N tuples, half of them on row 3 (heavy repeats).
  const int64_t v = 1000, d = 64, n = 4096;
  uint32_t seed = 60;
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt64}) {
    for (cu::ScatterReduction r :
         {cu::ScatterReduction::kAdd, cu::ScatterReduction::kNone, cu::ScatterReduction::kMax}) {
      Buf* data = make(keep, t, v * d);
      Buf* idx = make(keep, DType::kInt64, n);
      Buf* upd = make(keep, t, n * d);
      Buf* out = make(keep, t, v * d);
      fill(*data, t, seed++);
      fill(*idx, DType::kInt64, seed++, -v, v);
      for (int64_t i = 0; i < n; i += 2) idx->h<int64_t>()[i] = 3;
      idx->upload();
      fill(*upd, t, seed++);
      const size_t bytes = cu::scatter_nd_workspace_bytes({v, d}, n, 1);
      ASSERT_EQ(bytes, tw::scatter_nd_workspace_bytes({v, d}, n, 1));
      Buf* ws = make(keep, DType::kUInt8, static_cast<int64_t>(bytes));
      tw::scatter_nd(t, data->host.data(), {v, d}, DType::kInt64, idx->host.data(), n, 1,
                     upd->host.data(), r, out->host.data(), ws->host.data(), nullptr);
      cu::scatter_nd(t, data->dev, {v, d}, DType::kInt64, idx->dev, n, 1, upd->dev, r, out->dev,
                     ws->dev, nullptr, nullptr);
      expect_same(*out, "scatter_nd " + std::string(dtype_name(t)), dtype_size(t));
    }
  }
}

// ---------------------------------------------------------------- elementwise

TEST(KernelsDataGpu, BinaryWhereNotMatchTwins) {
  AMPC_REQUIRE_DEVICE();
  std::vector<std::unique_ptr<Buf>> keep;
  const Dims a_shape = {7, 1, 33, 5}, b_shape = {9, 1, 5}, out_shape = {7, 9, 33, 5};
  const int64_t n = count(out_shape);
  uint32_t seed = 80;
  for (DType t : {DType::kInt32, DType::kInt64, DType::kInt8, DType::kUInt8, DType::kBool}) {
    for (int op = 0; op <= 11; ++op) {
      const bool logical = op >= 9;
      if ((t == DType::kBool) != logical && !(t == DType::kBool && op == 4)) continue;
      Buf* a = make(keep, t, count(a_shape));
      Buf* b = make(keep, t, count(b_shape));
      const bool predicate = op >= 4;
      Buf* out = make(keep, predicate ? DType::kBool : t, n);
      if (t == DType::kBool) {
        fill(*a, t, seed++);
        fill(*b, t, seed++);
      } else {
        fill(*a, t, seed++, 0, 0, true);  // any bits: overflow, INT_MIN / -1, x / 0
        fill(*b, t, seed++, -3, 3);
      }
      tw::binary(static_cast<tw::BinaryOp>(op), t, a->host.data(), a_shape, b->host.data(), b_shape,
                 out->host.data(), out_shape);
      cu::binary(static_cast<cu::BinaryOp>(op), t, a->dev, a_shape, b->dev, b_shape, out->dev,
                 out_shape, nullptr);
      expect_same(*out, "binary " + std::to_string(op) + " " + std::string(dtype_name(t)));
    }
  }
  for (DType t : {DType::kFloat16, DType::kInt64, DType::kUInt8}) {
    Buf* c = make(keep, DType::kBool, 33 * 5);
    Buf* x = make(keep, t, 7 * 1 * 1 * 5);
    Buf* y = make(keep, t, n);
    Buf* out = make(keep, t, n);
    fill(*c, DType::kBool, seed++);
    fill(*x, t, seed++, 0, 0, true);
    fill(*y, t, seed++, 0, 0, true);
    tw::where(t, c->h<bool>(), {33, 5}, x->host.data(), {7, 1, 1, 5}, y->host.data(), out_shape,
              out->host.data(), out_shape);
    cu::where(t, static_cast<const bool*>(c->dev), {33, 5}, x->dev, {7, 1, 1, 5}, y->dev, out_shape,
              out->dev, out_shape, nullptr);
    expect_same(*out, "where", dtype_size(t));
  }
  Buf* in = make(keep, DType::kBool, 1001);
  Buf* out = make(keep, DType::kBool, 1001);
  fill(*in, DType::kBool, seed++);
  tw::logical_not(in->h<bool>(), out->h<bool>(), 1001);
  cu::logical_not(static_cast<const bool*>(in->dev), static_cast<bool*>(out->dev), 1001, nullptr);
  expect_same(*out, "logical_not");
}

TEST(KernelsDataGpu, CastBetweenEveryPairMatchesTwinIncludingSpecialValues) {
  AMPC_REQUIRE_DEVICE();
  std::vector<std::unique_ptr<Buf>> keep;
  const DType types[] = {DType::kBool,     DType::kInt32,   DType::kInt64,  DType::kFloat16,
                         DType::kBFloat16, DType::kFloat32, DType::kFloat64};
  const int64_t n = 1 << 16;
  uint32_t seed = 100;
  for (DType from : types) {
    for (DType to : types) {
      Buf* x = make(keep, from, n);
      Buf* y = make(keep, to, n);
      // Random bits: every class of value (NaN payloads, subnormals, huge integers); bool
      // inputs must hold 0 or 1.
      if (from == DType::kBool) {
        fill(*x, from, seed++);
      } else {
        fill(*x, from, seed++, 0, 0, true);
      }
      tw::cast(from, to, x->host.data(), y->host.data(), n);
      cu::cast(from, to, x->dev, y->dev, n, nullptr);
      expect_same(*y,
                  "cast " + std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)),
                  dtype_size(to));
    }
  }
}

// ---------------------------------------------------------------- pooling

struct PoolCase {
  int64_t planes, h, w, kh, kw, sh, sw, ph0, pw0, ph1, pw1, dh, dw;
  bool ceil;
};

template <typename G>
G geometry(const PoolCase& c) {
  G g;
  const int64_t in[2] = {c.h, c.w}, k[2] = {c.kh, c.kw}, s[2] = {c.sh, c.sw},
                p0[2] = {c.ph0, c.pw0}, p1[2] = {c.ph1, c.pw1}, d[2] = {c.dh, c.dw};
  for (int i = 0; i < 2; ++i) {
    const int64_t span = in[i] + p0[i] + p1[i] - ((k[i] - 1) * d[i] + 1);
    g.image[i + 1] = in[i];
    g.cols[i + 1] = 1 + (c.ceil ? (span + s[i] - 1) / s[i] : span / s[i]);
    g.kernel[i + 1] = k[i];
    g.stride[i + 1] = s[i];
    g.dilation[i + 1] = d[i];
    g.pad[i + 1] = p0[i];
    g.pad_end[i + 1] = p1[i];
  }
  return g;
}

const PoolCase kPoolCases[] = {
    {64, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false},  // ResNet's stem pool
    {6, 19, 23, 2, 3, 1, 2, 0, 1, 1, 0, 2, 1, true},
    {4, 7, 7, 3, 2, 3, 1, 2, 0, 2, 1, 1, 2, true},
    {3, 5, 6, 2, 2, 1, 1, 2, 0, 0, 0, 1, 1, false},  // windows entirely in the padding
};

TEST(KernelsDataGpu, PoolingAndItsGradientsMatchTwins) {
  AMPC_REQUIRE_DEVICE();
  std::vector<std::unique_ptr<Buf>> keep;
  uint32_t seed = 120;
  for (const PoolCase& c : kPoolCases) {
    const auto gt = geometry<tw::PoolGeometry>(c);
    const auto gc = geometry<cu::PoolGeometry>(c);
    const int64_t img = c.h * c.w, cols = gt.cols[1] * gt.cols[2];
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kUInt8}) {
      const size_t es = dtype_size(t);
      Buf* x = make(keep, t, c.planes * img);
      fill(*x, t, seed++, t == DType::kUInt8 ? 0 : -2, t == DType::kUInt8 ? 8 : 2);
      for (bool with_indices : {false, true}) {
        Buf* y = make(keep, t, c.planes * cols);
        Buf* ind = make(keep, DType::kInt64, c.planes * cols);
        tw::max_pool(t, gt, c.planes, x->host.data(), y->host.data(),
                     with_indices ? ind->h<int64_t>() : nullptr, with_indices);
        cu::max_pool(t, gc, c.planes, x->dev, y->dev,
                     with_indices ? static_cast<int64_t*>(ind->dev) : nullptr, with_indices,
                     nullptr);
        expect_same(*y, "max_pool", es);
        if (with_indices) expect_same(*ind, "max_pool indices", 8);
      }
      if (t == DType::kUInt8) continue;
      for (bool include : {false, true}) {
        Buf* y = make(keep, t, c.planes * cols);
        tw::average_pool(t, gt, c.planes, x->host.data(), y->host.data(), include);
        cu::average_pool(t, gc, c.planes, x->dev, y->dev, include, nullptr);
        expect_same(*y, "average_pool", es);
        Buf* dy = make(keep, t, c.planes * cols);
        Buf* dx = make(keep, t, c.planes * img);
        fill(*dy, t, seed++);
        tw::average_pool_grad(t, gt, c.planes, dy->host.data(), dx->host.data(), include);
        cu::average_pool_grad(t, gc, c.planes, dy->dev, dx->dev, include, nullptr);
        expect_same(*dx, "average_pool_grad", es);
        Buf* dxm = make(keep, t, c.planes * img);
        tw::max_pool_grad(t, gt, c.planes, x->host.data(), dy->host.data(), dxm->host.data());
        cu::max_pool_grad(t, gc, c.planes, x->dev, dy->dev, dxm->dev, nullptr);
        expect_same(*dxm, "max_pool_grad", es);
      }
      Buf* g = make(keep, t, c.planes);
      tw::global_average_pool(t, c.planes, img, x->host.data(), g->host.data());
      cu::global_average_pool(t, c.planes, img, x->dev, g->dev, nullptr);
      expect_same(*g, "global_average_pool", es);
    }
  }
}

// ---------------------------------------------------------------- BatchNormalization

TEST(KernelsDataGpu, BatchNormTrainingAndInferenceMatchTwins) {
  AMPC_REQUIRE_DEVICE();
  std::vector<std::unique_ptr<Buf>> keep;
  struct Case {
    int64_t n, c, spatial;
  };
  uint32_t seed = 140;
  for (const Case& k : {Case{4, 3, 30}, Case{32, 64, 56 * 56}, Case{256, 16, 1}, Case{2, 1, 0}}) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
      const DType p = t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
      const int64_t total = k.n * k.c * k.spatial;
      Buf* x = make(keep, t, total);
      Buf* y = make(keep, t, total);
      Buf* yi = make(keep, t, total);
      Buf* params[4];
      for (Buf*& q : params) {
        q = make(keep, p, k.c);
        fill(*q, p, seed++, 0.5, 2);
      }
      Buf* stats[4];
      for (Buf*& q : stats) q = make(keep, p, k.c);
      fill(*x, t, seed++, -3, 5);
      const size_t bytes = cu::batch_norm_training_workspace_bytes(k.n, k.c, k.spatial);
      ASSERT_EQ(bytes, tw::batch_norm_training_workspace_bytes(k.n, k.c, k.spatial));
      Buf* ws = make(keep, DType::kUInt8, static_cast<int64_t>(bytes));
      tw::batch_norm_training(t, p, p, x->host.data(), k.n, k.c, k.spatial, params[0]->host.data(),
                              params[1]->host.data(), params[2]->host.data(),
                              params[3]->host.data(), 1e-5f, 0.9f, y->host.data(),
                              stats[0]->host.data(), stats[1]->host.data(), stats[2]->host.data(),
                              stats[3]->host.data(), ws->host.data());
      cu::batch_norm_training(t, p, p, x->dev, k.n, k.c, k.spatial, params[0]->dev, params[1]->dev,
                              params[2]->dev, params[3]->dev, 1e-5f, 0.9f, y->dev, stats[0]->dev,
                              stats[1]->dev, stats[2]->dev, stats[3]->dev, ws->dev, nullptr);
      expect_same(*y, "batch_norm_training y " + std::string(dtype_name(t)), dtype_size(t));
      for (Buf* q : stats) expect_same(*q, "batch_norm_training statistics", dtype_size(p));
      tw::batch_norm_inference(t, p, p, x->host.data(), k.n, k.c, k.spatial, params[0]->host.data(),
                               params[1]->host.data(), params[2]->host.data(),
                               params[3]->host.data(), 1e-5f, yi->host.data());
      cu::batch_norm_inference(t, p, p, x->dev, k.n, k.c, k.spatial, params[0]->dev, params[1]->dev,
                               params[2]->dev, params[3]->dev, 1e-5f, yi->dev, nullptr);
      expect_same(*yi, "batch_norm_inference", dtype_size(t));
      // The backward of training mode, with y as dY.
      Buf* dx = make(keep, t, total);
      Buf* dparams[2];
      for (Buf*& q : dparams) q = make(keep, p, k.c);
      const size_t grad_bytes = cu::batch_norm_grad_workspace_bytes(k.n, k.c, k.spatial);
      ASSERT_EQ(grad_bytes, tw::batch_norm_grad_workspace_bytes(k.n, k.c, k.spatial));
      Buf* gws = make(keep, DType::kUInt8, static_cast<int64_t>(grad_bytes));
      tw::batch_norm_grad(t, p, x->host.data(), y->host.data(), k.n, k.c, k.spatial,
                          params[0]->host.data(), 1e-5f, dx->host.data(), dparams[0]->host.data(),
                          dparams[1]->host.data(), gws->host.data());
      cu::batch_norm_grad(t, p, x->dev, y->dev, k.n, k.c, k.spatial, params[0]->dev, 1e-5f, dx->dev,
                          dparams[0]->dev, dparams[1]->dev, gws->dev, nullptr);
      expect_same(*dx, "batch_norm_grad dx " + std::string(dtype_name(t)), dtype_size(t));
      for (Buf* q : dparams) expect_same(*q, "batch_norm_grad dscale / dbias", dtype_size(p));
    }
  }
}

// ---------------------------------------------------------------- Dropout

// Every element type, the bool and the value mask, a fixed key and the run's key read from
// device memory; then one captured launch replayed with two run keys written between the
// replays (as the executor writes each run's key with its inputs): each replay draws its own
// run's mask, the twin's bit for bit.
TEST(KernelsDataGpu, DropoutMatchesTwinAndReadsTheRunKeyAtEachReplay) {
  AMPC_REQUIRE_DEVICE();
  namespace sh = ampc::kernels::shared;
  const int64_t n = (1 << 20) + 3;
  Buf run(8);
  uint64_t host_run = sh::run_key(11, 0);
  std::memcpy(run.host.data(), &host_run, 8);
  run.upload();
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    for (bool through_run : {false, true}) {
      std::vector<std::unique_ptr<Buf>> keep;
      Buf* x = make(keep, t, n);
      Buf* y = make(keep, t, n);
      Buf* mask = make(keep, DType::kBool, n);
      Buf* values = make(keep, t, n);
      fill(*x, t, 170);
      const sh::DropoutKey dev_key =
          through_run ? sh::DropoutKey{.run = static_cast<const uint64_t*>(run.dev), .step = 9}
                      : sh::DropoutKey{.fixed = 0xABCDEF};
      const sh::DropoutKey host_key =
          through_run ? sh::DropoutKey{.run = &host_run, .step = 9} : dev_key;
      tw::dropout(t, x->host.data(), y->host.data(), mask->h<bool>(), values->host.data(), n, 0.2,
                  true, host_key);
      cu::dropout(t, x->dev, y->dev, static_cast<bool*>(mask->dev), values->dev, n, 0.2, true,
                  dev_key, nullptr);
      const std::string what = std::string("dropout ") + std::string(dtype_name(t)) +
                               (through_run ? ", run key" : ", fixed key");
      expect_same(*y, what + " y", dtype_size(t));
      expect_same(*mask, what + " mask");
      expect_same(*values, what + " mask values", dtype_size(t));
    }
  }
  std::vector<std::unique_ptr<Buf>> keep;
  Buf* x = make(keep, DType::kFloat32, n);
  Buf* y = make(keep, DType::kFloat32, n);
  fill(*x, DType::kFloat32, 171);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  cu::dropout(DType::kFloat32, x->dev, y->dev, nullptr, nullptr, n, 0.5, true,
              {.run = static_cast<const uint64_t*>(run.dev), .step = 3}, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<uint8_t> first;
  for (int64_t r = 0; r < 2; ++r) {
    host_run = sh::run_key(11, r);
    CUDA_OK(cudaMemcpyAsync(run.dev, &host_run, 8, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    tw::dropout(DType::kFloat32, x->host.data(), y->host.data(), nullptr, nullptr, n, 0.5, true,
                {.fixed = sh::step_key(host_run, 3)});
    expect_same(*y, "captured dropout, run " + std::to_string(r), 4);
    if (r == 0) first = y->host;
  }
  EXPECT_NE(first, y->host) << "the second replay drew the first run's mask";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// ---------------------------------------------------------------- RandomUniform / RandomNormal

// The device's elements are the twin's within `ulps` units in the last place (the element's
// bits as an integer of its size: adjacent values of one sign differ by one); at most
// `max_off` elements may differ at all.
void expect_within_ulps(const Buf& out, DType t, int64_t ulps, int64_t max_off,
                        const std::string& what) {
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  const std::vector<uint8_t> got = out.download();
  const size_t size = dtype_size(t);
  int64_t off = 0;
  for (size_t i = 0; i < got.size() / size; ++i) {
    int64_t a = 0, b = 0;  // sign-extended bits
    std::memcpy(&a, &got[i * size], size);
    std::memcpy(&b, &out.host[i * size], size);
    if (a == b) continue;
    ++off;
    const int shift = static_cast<int>(64 - 8 * size);
    const int64_t d = ((a << shift) >> shift) - ((b << shift) >> shift);
    ASSERT_LE(std::abs(d), ulps) << what << ": element " << i;
  }
  EXPECT_LE(off, max_off) << what << ": elements that differ";
}

// Every float type, uniform and normal draws with the ops' parameters, a fixed key and the
// run's key read from device memory; then a captured launch replayed with two run keys.
TEST(KernelsDataGpu, RandomFillMatchesTwinAndReadsTheRunKeyAtEachReplay) {
  AMPC_REQUIRE_DEVICE();
  namespace sh = ampc::kernels::shared;
  const int64_t n = (1 << 20) + 5;
  Buf run(8);
  uint64_t host_run = sh::run_key(12, 0);
  std::memcpy(run.host.data(), &host_run, 8);
  run.upload();
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    for (bool normal : {false, true}) {
      for (bool through_run : {false, true}) {
        std::vector<std::unique_ptr<Buf>> keep;
        Buf* y = make(keep, t, n);
        // Mean 0: a mean that cancels a draw would turn the last bits of the double into many
        // units of f64's last place.
        const sh::RandomDraw draw{.normal = normal, .a = normal ? 0.0 : -2.0, .b = 3.0};
        const sh::DropoutKey dev_key =
            through_run ? sh::DropoutKey{.run = static_cast<const uint64_t*>(run.dev), .step = 4}
                        : sh::DropoutKey{.fixed = 77};
        const sh::DropoutKey host_key =
            through_run ? sh::DropoutKey{.run = &host_run, .step = 4} : dev_key;
        tw::random_fill(t, y->host.data(), n, draw, host_key);
        cu::random_fill(t, y->dev, n, draw, dev_key, nullptr);
        const std::string what = std::string(normal ? "normal " : "uniform ") +
                                 std::string(dtype_name(t)) +
                                 (through_run ? ", run key" : ", fixed key");
        if (!normal) {
          expect_same(*y, what, dtype_size(t));
        } else {
          expect_within_ulps(*y, t, t == DType::kFloat64 ? 8 : 1, t == DType::kFloat64 ? n : 16,
                             what);
        }
      }
    }
  }
  std::vector<std::unique_ptr<Buf>> keep;
  Buf* y = make(keep, DType::kFloat32, n);
  const sh::RandomDraw draw{.normal = false, .a = 0, .b = 1};
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  cu::random_fill(DType::kFloat32, y->dev, n, draw,
                  {.run = static_cast<const uint64_t*>(run.dev), .step = 2}, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<uint8_t> first;
  for (int64_t r = 0; r < 2; ++r) {
    host_run = sh::run_key(12, r);
    CUDA_OK(cudaMemcpyAsync(run.dev, &host_run, 8, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    tw::random_fill(DType::kFloat32, y->host.data(), n, draw, {.fixed = sh::step_key(host_run, 2)});
    expect_same(*y, "captured random_fill, run " + std::to_string(r), 4);
    if (r == 0) first = y->host;
  }
  EXPECT_NE(first, y->host) << "the second replay drew the first run's values";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// ---------------------------------------------------------------- CUDA Graph capture

TEST(KernelsDataGpu, LaunchesAreCapturableInACudaGraph) {
  AMPC_REQUIRE_DEVICE();
  std::vector<std::unique_ptr<Buf>> keep;
  const int64_t v = 300, d = 32, n = 500;
  Buf* table = make(keep, DType::kFloat32, v * d);
  Buf* idx = make(keep, DType::kInt32, n);
  Buf* rows = make(keep, DType::kFloat32, n * d);
  Buf* grad = make(keep, DType::kFloat32, v * d);
  Buf* zeros = make(keep, DType::kFloat32, v * d);
  fill(*table, DType::kFloat32, 160);
  fill(*idx, DType::kInt32, 161, 0, 40);
  CUDA_OK(cudaMemset(zeros->dev, 0, zeros->host.size()));
  const size_t bytes = cu::scatter_nd_workspace_bytes({v, d}, n, 1);
  Buf* ws = make(keep, DType::kUInt8, static_cast<int64_t>(bytes));
  tw::gather(DType::kFloat32, table->host.data(), 1, v, d, DType::kInt32, idx->host.data(), n,
             rows->host.data(), nullptr);
  tw::scatter_nd(DType::kFloat32, zeros->host.data(), {v, d}, DType::kInt32, idx->host.data(), n, 1,
                 rows->host.data(), tw::ScatterReduction::kAdd, grad->host.data(), ws->host.data(),
                 nullptr);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  cu::gather(DType::kFloat32, table->dev, 1, v, d, DType::kInt32, idx->dev, n, rows->dev, nullptr,
             stream);
  cu::scatter_nd(DType::kFloat32, zeros->dev, {v, d}, DType::kInt32, idx->dev, n, 1, rows->dev,
                 cu::ScatterReduction::kAdd, grad->dev, ws->dev, nullptr, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 2; ++i) CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  expect_same(*rows, "captured gather", 4);
  expect_same(*grad, "captured scatter_nd", 4);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace ampc
