// CPU side of the data-movement, elementwise, pooling, BatchNorm and reduction CUDA kernels:
// their twins (kernels/twin, the kernels' per-element code and order run on the host) against
// the CPU backend's operators (runtime/cpu/ops through the registry), on random inputs, bit for
// bit. Pooling, BatchNorm and the float Reduce ops are the twins themselves in the CPU backend
// (the op calls the twin), so these tests pin that routing for every dtype; the pooling twins'
// row-at-a-time and scatter loops are also checked against pool_math.h's per-index functors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "kernels/shared/batchnorm_layout.h"
#include "kernels/shared/pool_layout.h"
#include "kernels/shared/rowwise_tree.h"
#include "kernels/twin/batchnorm.h"
#include "kernels/twin/bias.h"
#include "kernels/twin/copy.h"
#include "kernels/twin/elementwise.h"
#include "kernels/twin/gather_scatter.h"
#include "kernels/twin/index_loop.h"
#include "kernels/twin/pad.h"
#include "kernels/twin/pool.h"
#include "kernels/twin/reduce.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::rt::cpu {
namespace {

namespace tw = ampc::kernels::twin;
using optest::attr_f;
using optest::attr_i;
using optest::attr_ints;
using optest::attr_s;
using Dims = std::vector<int64_t>;

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

// Random values in [lo, hi): integers rounded, bool from the sign, 16-bit floats exact.
Tensor random(DType t, const Dims& shape, uint32_t seed, double lo = -4, double hi = 4) {
  std::vector<double> v = optest::pseudo_random(static_cast<size_t>(count(shape)), seed);
  for (double& x : v) x = lo + (x + 1) / 2 * (hi - lo);
  if (t == DType::kBool) {
    Tensor b(t, shape);
    for (size_t i = 0; i < v.size(); ++i) b.data<bool>()[i] = v[i] > (lo + hi) / 2;
    return b;
  }
  if (!is_float(t))
    for (double& x : v) x = std::floor(x);
  return optest::make(t, shape, v);
}

// Byte-for-byte equality (NaN payloads and the sign of zero included).
void expect_same_bytes(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.nbytes(), want.nbytes()) << what;
  const auto* g = static_cast<const uint8_t*>(got.raw());
  const auto* w = static_cast<const uint8_t*>(want.raw());
  const size_t es = dtype_size(want.dtype());
  for (size_t i = 0; i < want.nbytes(); ++i) {
    ASSERT_EQ(g[i], w[i]) << what << ": element " << i / es << " of " << want.type_str();
  }
}

Tensor ints(const Dims& v) {
  return optest::make(DType::kInt64, {static_cast<int64_t>(v.size())},
                      std::vector<double>(v.begin(), v.end()));
}

// ---------------------------------------------------------------- strided copy family

TEST(TwinCopy, TransposeMatchesCpuOpForEveryElementSize) {
  const Dims shape = {3, 4, 5, 6};
  const Dims perm = {2, 0, 3, 1};
  uint32_t seed = 1;
  for (DType t : {DType::kUInt8, DType::kFloat16, DType::kFloat32, DType::kInt64}) {
    const Tensor x = random(t, shape, seed++);
    const Tensor want = optest::run("Transpose", {x}, {attr_ints("perm", perm)}, 1, 13)[0];
    const Dims in_st = contiguous(shape);
    Dims out_shape, src_st;
    for (int64_t p : perm) {
      out_shape.push_back(shape[p]);
      src_st.push_back(in_st[p]);
    }
    Tensor got(t, out_shape);
    tw::strided_copy(t, out_shape, x.raw(), 0, src_st, got.raw(), 0, contiguous(out_shape));
    expect_same_bytes(got, want, "Transpose");
  }
}

// Slice's view (offset, strides) from starts / ends / steps, as the runtime resolves it.
void slice_view(const Dims& shape, const Dims& starts, const Dims& ends, const Dims& steps,
                Dims* out_shape, int64_t* offset, Dims* strides) {
  const Dims in_st = contiguous(shape);
  *out_shape = shape;
  *strides = in_st;
  *offset = 0;
  for (size_t a = 0; a < shape.size(); ++a) {
    const int64_t dim = shape[a], step = steps[a];
    int64_t s = starts[a] < 0 ? starts[a] + dim : starts[a];
    int64_t e = ends[a] < 0 ? ends[a] + dim : ends[a];
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      (*out_shape)[a] = e > s ? (e - s - 1) / step + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      (*out_shape)[a] = s > e ? (s - e - 1) / -step + 1 : 0;
    }
    if ((*out_shape)[a] > 0) *offset += s * in_st[a];
    (*strides)[a] = in_st[a] * step;
  }
}

TEST(TwinCopy, SliceWithPositiveAndNegativeStepsMatchesCpuOp) {
  const Dims shape = {6, 7, 9};
  struct Case {
    Dims starts, ends, steps;
  };
  const Case cases[] = {
      {{0, 1, 2}, {6, 7, 9}, {1, 2, 3}},
      {{-1, 6, 8}, {-7, -8, 0}, {-1, -2, -3}},
      {{5, 0, -2}, {1, 7, -100}, {-2, 1, -1}},
      {{1, 2, 3}, {4, 5, 9}, {1, 1, 1}},  // contiguous innermost rows
  };
  uint32_t seed = 10;
  for (const Case& c : cases) {
    for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kInt8}) {
      const Tensor x = random(t, shape, seed++);
      const Tensor want = optest::run(
          "Slice", {x, ints(c.starts), ints(c.ends), ints({0, 1, 2}), ints(c.steps)}, {}, 1, 13)[0];
      Dims out_shape, strides;
      int64_t offset;
      slice_view(shape, c.starts, c.ends, c.steps, &out_shape, &offset, &strides);
      Tensor got(t, out_shape);
      tw::strided_copy(t, out_shape, x.raw(), offset, strides, got.raw(), 0, contiguous(out_shape));
      expect_same_bytes(got, want, "Slice");
    }
  }
}

TEST(TwinCopy, ExpandConcatSplitAndContiguousCopyMatchCpuOps) {
  // Expand [3, 1, 5] -> [2, 3, 4, 5]: stride 0 on the broadcast dimensions.
  const Tensor x = random(DType::kFloat16, {3, 1, 5}, 30);
  const Tensor want = optest::run("Expand", {x, ints({2, 3, 4, 5})}, {}, 1, 13)[0];
  Tensor got(DType::kFloat16, {2, 3, 4, 5});
  tw::strided_copy(DType::kFloat16, {2, 3, 4, 5}, x.raw(), 0, {0, 5, 0, 1}, got.raw(), 0,
                   contiguous({2, 3, 4, 5}));
  expect_same_bytes(got, want, "Expand");

  // Concat along axis 1 of [2, a_k, 3, 2].
  const Dims sizes = {1, 4, 2};
  std::vector<Tensor> parts;
  std::vector<const void*> ptrs;
  for (size_t k = 0; k < sizes.size(); ++k) {
    parts.push_back(random(DType::kInt32, {2, sizes[k], 3, 2}, 31 + static_cast<uint32_t>(k)));
    ptrs.push_back(parts.back().raw());
  }
  const Tensor cat = optest::run("Concat", parts, {attr_i("axis", 1)}, 1, 13)[0];
  Tensor cat_got(DType::kInt32, cat.shape());
  tw::concat(DType::kInt32, ptrs, sizes, 2, 6, cat_got.raw());
  expect_same_bytes(cat_got, cat, "Concat");

  // Split it back (opset 13: split sizes as an input).
  const std::vector<Tensor> outs =
      optest::run("Split", {cat, ints(sizes)}, {attr_i("axis", 1)}, 3, 13);
  std::vector<Tensor> got_parts;
  std::vector<void*> out_ptrs;
  for (const Tensor& o : outs) got_parts.emplace_back(o.dtype(), o.shape());
  for (Tensor& o : got_parts) out_ptrs.push_back(o.raw());
  tw::split(DType::kInt32, cat.raw(), 2, 6, sizes, out_ptrs);
  for (size_t k = 0; k < outs.size(); ++k) expect_same_bytes(got_parts[k], outs[k], "Split");

  Tensor copy(DType::kInt32, cat.shape());
  tw::contiguous_copy(DType::kInt32, cat.raw(), copy.raw(), cat.numel());
  expect_same_bytes(copy, cat, "contiguous_copy");
}

TEST(TwinCopy, RefusesMoreThanEightUnmergeableDimensionsAndStrings) {
  const Dims shape(9, 2);
  Dims src(9), dst = contiguous(shape);
  for (int d = 0; d < 9; ++d) src[d] = int64_t(1) << (2 * d);  // never mergeable
  std::vector<float> in(1 << 18), out(512);
  EXPECT_THROW(tw::strided_copy(DType::kFloat32, shape, in.data(), 0, src, out.data(), 0, dst),
               Error);
  EXPECT_THROW(tw::contiguous_copy(DType::kString, in.data(), out.data(), 1), Error);
  // Nine dimensions that merge are fine.
  tw::strided_copy(DType::kFloat32, shape, in.data(), 0, dst, out.data(), 0, dst);
}

// ---------------------------------------------------------------- Pad

TEST(TwinPad, EveryModeWithPositiveAndNegativePadsMatchesCpuOp) {
  const Dims shape = {3, 4, 5};
  const Dims begin = {1, -1, 2}, end = {2, 3, -2};
  uint32_t seed = 40;
  for (const char* mode : {"constant", "edge", "reflect"}) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kInt64, DType::kUInt8}) {
      const Tensor x = random(t, shape, seed++, 0, 100);
      const Tensor value = random(t, {1}, seed++, 0, 100);
      Dims pads = begin;
      pads.insert(pads.end(), end.begin(), end.end());
      const Tensor want =
          optest::run("Pad", {x, ints(pads), value}, {attr_s("mode", mode)}, 1, 18)[0];
      Tensor got(t, want.shape());
      const tw::PadMode m = std::string(mode) == "constant" ? tw::PadMode::kConstant
                            : std::string(mode) == "edge"   ? tw::PadMode::kEdge
                                                            : tw::PadMode::kReflect;
      tw::pad(t, x.raw(), shape, begin, end, m, value.raw(), 0.0f, got.raw());
      expect_same_bytes(got, want, std::string("Pad ") + mode);
    }
  }
}

TEST(TwinPad, AttributeValueBeforeOpset11IsConvertedAsTheCpuOpConvertsIt) {
  const Tensor x = random(DType::kInt32, {2, 3}, 50);
  const Tensor want =
      optest::run("Pad", {x}, {attr_ints("pads", {0, 1, 1, 2}), attr_f("value", -7.75f)}, 1, 2)[0];
  Tensor got(DType::kInt32, want.shape());
  tw::pad(DType::kInt32, x.raw(), {2, 3}, {0, 1}, {1, 2}, tw::PadMode::kConstant, nullptr, -7.75f,
          got.raw());
  expect_same_bytes(got, want, "Pad value");
}

// ---------------------------------------------------------------- Gather / ScatterND

TEST(TwinGather, AnyAxisNegativeIndicesBothIndexTypesMatchCpuOp) {
  const Dims shape = {4, 5, 6};
  uint32_t seed = 60;
  for (int64_t axis = 0; axis < 3; ++axis) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kInt64, DType::kBool}) {
      for (DType it : {DType::kInt32, DType::kInt64}) {
        const int64_t dim = shape[axis];
        const Tensor idx = optest::make(
            it, {2, 3}, {0, -1, static_cast<double>(dim - 1), static_cast<double>(-dim), 1, -2});
        const Tensor x = random(t, shape, seed++);
        const Tensor want = optest::run("Gather", {x, idx}, {attr_i("axis", axis)}, 1, 13)[0];
        Tensor got(t, want.shape());
        int64_t outer = 1, inner = 1;
        for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
        for (int64_t d = axis + 1; d < 3; ++d) inner *= shape[d];
        int32_t bad = 0;
        tw::gather(t, x.raw(), outer, dim, inner, it, idx.raw(), 6, got.raw(), &bad);
        expect_same_bytes(got, want, "Gather axis " + std::to_string(axis));
        EXPECT_EQ(bad, 0);
      }
    }
  }
}

TEST(TwinGather, OutOfRangeIndicesAreClampedAndFlagged) {
  // The CPU op refuses them; the device cannot, so it clamps and raises the flag.
  EXPECT_NE(
      optest::run_error(
          "Gather", {random(DType::kFloat32, {3, 2}, 61), optest::make(DType::kInt64, {1}, {3})},
          {}, 1, 13),
      "(no error)");
  const std::vector<float> x = {0, 1, 2, 3, 4, 5};  // [3, 2]
  const std::vector<int64_t> idx = {3, -4, 1};
  std::vector<float> y(6);
  int32_t bad = 0;
  tw::gather(DType::kFloat32, x.data(), 1, 3, 2, DType::kInt64, idx.data(), 3, y.data(), &bad);
  EXPECT_EQ(bad, 1);
  EXPECT_EQ(y, (std::vector<float>{4, 5, 0, 1, 2, 3}));
}

// ScatterND through the twin (with its workspace).
Tensor scatter_twin(const Tensor& data, const Tensor& idx, const Tensor& upd, const char* red) {
  const std::string r = red;
  const tw::ScatterReduction reduction = r == "none"  ? tw::ScatterReduction::kNone
                                         : r == "add" ? tw::ScatterReduction::kAdd
                                         : r == "mul" ? tw::ScatterReduction::kMul
                                         : r == "max" ? tw::ScatterReduction::kMax
                                                      : tw::ScatterReduction::kMin;
  const int64_t depth = idx.dim(idx.rank() - 1), tuples = idx.numel() / depth;
  std::vector<char> ws(tw::scatter_nd_workspace_bytes(data.shape(), tuples, depth));
  Tensor out(data.dtype(), data.shape());
  int32_t bad = 0;
  tw::scatter_nd(data.dtype(), data.raw(), data.shape(), idx.dtype(), idx.raw(), tuples, depth,
                 upd.raw(), reduction, out.raw(), ws.data(), &bad);
  EXPECT_EQ(bad, 0);
  return out;
}

TEST(TwinScatterND, EmbeddingGradientWithRepeatedRowsMatchesCpuOpBitForBit) {
  // data [V, D] = 0, indices [N, 1] with many repeats, updates [N, D]: the CPU op adds in
  // tuple order (16-bit: in fp32, rounded once); the twin's per-row order is the same.
  const int64_t v = 7, d = 5, n = 40;
  std::vector<double> rows(n);
  const auto r = optest::pseudo_random(n, 70);
  for (int64_t i = 0; i < n; ++i) rows[i] = std::floor((r[i] + 1) / 2 * v) - (i % 3 == 0 ? v : 0);
  uint32_t seed = 71;
  for (DType t :
       {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt64, DType::kFloat64}) {
    for (DType it : {DType::kInt64, DType::kInt32}) {
      const Tensor idx = optest::make(it, {n, 1}, rows);
      const Tensor data = random(t, {v, d}, seed++);
      const Tensor upd = random(t, {n, d}, seed++);
      for (const char* red : {"add", "none", "mul", "max", "min"}) {
        const Tensor want =
            optest::run("ScatterND", {data, idx, upd}, {attr_s("reduction", red)}, 1, 18)[0];
        expect_same_bytes(scatter_twin(data, idx, upd, red), want,
                          std::string("ScatterND ") + red + " " + std::string(dtype_name(t)));
      }
    }
  }
}

TEST(TwinScatterND, DeepTuplesAndWholeTensorTuplesMatchCpuOp) {
  const Tensor data = random(DType::kFloat32, {3, 4, 2}, 80);
  // Tuples address single elements (depth 3) and rows of 2 (depth 2), with repeats.
  const Tensor idx3 = optest::make(DType::kInt64, {4, 3}, {0, 1, 1, 2, 3, 0, 0, 1, 1, -1, -1, -1});
  const Tensor upd3 = random(DType::kFloat32, {4}, 81);
  const Tensor idx2 = optest::make(DType::kInt64, {3, 2}, {2, 3, -1, -1, 0, 0});
  const Tensor upd2 = random(DType::kFloat32, {3, 2}, 82);
  for (const char* red : {"none", "add"}) {
    expect_same_bytes(
        scatter_twin(data, idx3, upd3, red),
        optest::run("ScatterND", {data, idx3, upd3}, {attr_s("reduction", red)}, 1, 18)[0],
        "depth 3");
    expect_same_bytes(
        scatter_twin(data, idx2, upd2, red),
        optest::run("ScatterND", {data, idx2, upd2}, {attr_s("reduction", red)}, 1, 18)[0],
        "depth 2");
  }
}

// ---------------------------------------------------------------- elementwise

TEST(TwinElementwise, IntegerArithmeticAndComparisonsWithBroadcastingMatchCpuOps) {
  const char* ops[] = {"Add",  "Sub",     "Mul",         "Div",           "Equal",
                       "Less", "Greater", "LessOrEqual", "GreaterOrEqual"};
  const tw::BinaryOp codes[] = {
      tw::BinaryOp::kAdd,     tw::BinaryOp::kSub,         tw::BinaryOp::kMul,
      tw::BinaryOp::kDiv,     tw::BinaryOp::kEqual,       tw::BinaryOp::kLess,
      tw::BinaryOp::kGreater, tw::BinaryOp::kLessOrEqual, tw::BinaryOp::kGreaterOrEqual};
  const Dims a_shape = {2, 1, 4, 3}, b_shape = {5, 1, 3}, out_shape = {2, 5, 4, 3};
  uint32_t seed = 90;
  for (DType t : {DType::kInt32, DType::kInt64, DType::kInt8, DType::kUInt8}) {
    const double lo = t == DType::kUInt8 ? 0 : -6, hi = t == DType::kUInt8 ? 255 : 6;
    const Tensor a = random(t, a_shape, seed++, lo, hi);
    const Tensor b = random(t, b_shape, seed++, lo, hi);  // zeros included: x / 0 = 0
    for (size_t k = 0; k < std::size(ops); ++k) {
      const Tensor want = optest::run(ops[k], {a, b}, {}, 1, 14)[0];
      Tensor got(want.dtype(), out_shape);
      tw::binary(codes[k], t, a.raw(), a_shape, b.raw(), b_shape, got.raw(), out_shape);
      expect_same_bytes(got, want, std::string(ops[k]) + " " + std::string(dtype_name(t)));
    }
  }
}

TEST(TwinElementwise, IntegerOverflowDivisionByZeroAndMinOverMinusOneMatchCpuOps) {
  const int32_t mn = std::numeric_limits<int32_t>::min(), mx = std::numeric_limits<int32_t>::max();
  const Tensor a = optest::make(DType::kInt32, {5}, {double(mn), double(mx), 7, -7, double(mn)});
  const Tensor b = optest::make(DType::kInt32, {5}, {-1, 1, 0, 2, double(mn)});
  for (auto [op, code] : {std::pair{"Add", tw::BinaryOp::kAdd},
                          {"Sub", tw::BinaryOp::kSub},
                          {"Mul", tw::BinaryOp::kMul},
                          {"Div", tw::BinaryOp::kDiv}}) {
    const Tensor want = optest::run(op, {a, b}, {}, 1, 14)[0];
    Tensor got(DType::kInt32, {5});
    tw::binary(code, DType::kInt32, a.raw(), {5}, b.raw(), {5}, got.raw(), {5});
    expect_same_bytes(got, want, op);
  }
}

TEST(TwinElementwise, BoolLogicWhereAndNotMatchCpuOps) {
  const Tensor a = random(DType::kBool, {3, 1, 4}, 100);
  const Tensor b = random(DType::kBool, {2, 4}, 101);
  for (auto [op, code] : {std::pair{"And", tw::BinaryOp::kAnd},
                          {"Or", tw::BinaryOp::kOr},
                          {"Xor", tw::BinaryOp::kXor},
                          {"Equal", tw::BinaryOp::kEqual}}) {
    const Tensor want = optest::run(op, {a, b}, {}, 1, 13)[0];
    Tensor got(DType::kBool, {3, 2, 4});
    tw::binary(code, DType::kBool, a.raw(), {3, 1, 4}, b.raw(), {2, 4}, got.raw(), {3, 2, 4});
    expect_same_bytes(got, want, op);
  }
  EXPECT_THROW(tw::binary(tw::BinaryOp::kAdd, DType::kBool, a.raw(), {3, 1, 4}, b.raw(), {2, 4},
                          nullptr, {3, 2, 4}),
               Error);
  EXPECT_THROW(tw::binary(tw::BinaryOp::kAnd, DType::kInt32, a.raw(), {3, 1, 4}, b.raw(), {2, 4},
                          nullptr, {3, 2, 4}),
               Error);
  const Tensor n = optest::run("Not", {a}, {}, 1, 13)[0];
  Tensor n_got(DType::kBool, a.shape());
  tw::logical_not(a.data<bool>(), n_got.data<bool>(), a.numel());
  expect_same_bytes(n_got, n, "Not");

  uint32_t seed = 102;
  for (DType t : {DType::kFloat16, DType::kInt64, DType::kFloat32, DType::kUInt8, DType::kBool}) {
    const Tensor c = random(DType::kBool, {4, 1}, seed++);
    const Tensor x = random(t, {1, 3}, seed++);
    const Tensor y = random(t, {2, 4, 3}, seed++);
    const Tensor want = optest::run("Where", {c, x, y}, {}, 1, 16)[0];
    Tensor got(t, {2, 4, 3});
    tw::where(t, c.data<bool>(), {4, 1}, x.raw(), {1, 3}, y.raw(), {2, 4, 3}, got.raw(), {2, 4, 3});
    expect_same_bytes(got, want, "Where " + std::string(dtype_name(t)));
  }
}

// Values that exercise a cast from t: specials (NaN, infinities, -0, subnormals, 16-bit
// halfway cases, integers beyond 2^24), restricted to the target integer's range when casting
// to an integer (the CPU op's float -> integer conversion is undefined outside it).
std::vector<double> cast_values(DType from, DType to) {
  std::vector<double> v = {0.0,
                           -0.0,
                           1.0,
                           -1.0,
                           0.5,
                           2.5,
                           -3.75,
                           1e-3,
                           65504.0,
                           65520.0,
                           1.00048828125,
                           1.0009765625 + 0x1p-11,
                           0x1p-24,
                           3e-8,
                           1e-30,
                           16777217.0,
                           -16777219.0,
                           2147483520.0,
                           123456789.0,
                           1e10,
                           -1e10,
                           3.0e38,
                           1e300,
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN()};
  const auto r =
      optest::pseudo_random(64, static_cast<uint32_t>(from) * 31 + static_cast<uint32_t>(to));
  for (double x : r) v.push_back(x * 1000.0);
  std::vector<double> out;
  for (double x : v) {
    if (from == DType::kInt32 || from == DType::kInt64) {
      if (!std::isfinite(x)) continue;
      x = std::trunc(x);
      if (from == DType::kInt32 && std::abs(x) >= 2147483647.0) continue;
      if (std::abs(x) >= 9e18) continue;
    }
    if (to == DType::kInt32 || to == DType::kInt64) {
      // the value as the source type holds it must lie inside the target's range
      if (!std::isfinite(x) || std::abs(x) >= (to == DType::kInt32 ? 2147483000.0 : 9e18)) continue;
      if (from == DType::kFloat16 && std::abs(x) > 65504) continue;
      if (from == DType::kFloat32 && std::abs(x) >= 2147483000.0) continue;
    }
    if (from == DType::kBool) x = x != 0 && !std::isnan(x);
    out.push_back(x);
  }
  return out;
}

// A tensor of `from` holding v (16-bit floats rounded from v; bool as v != 0).
Tensor cast_input(DType from, const std::vector<double>& v) {
  const Dims shape = {static_cast<int64_t>(v.size())};
  if (from == DType::kBool) {
    Tensor t(from, shape);
    for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i] != 0;
    return t;
  }
  return optest::make(from, shape, v);
}

TEST(TwinElementwise, CastBetweenEveryPairMatchesCpuOpBitForBit) {
  const DType types[] = {DType::kBool,     DType::kInt32,   DType::kInt64,  DType::kFloat16,
                         DType::kBFloat16, DType::kFloat32, DType::kFloat64};
  for (DType from : types) {
    for (DType to : types) {
      const Tensor x = cast_input(from, cast_values(from, to));
      const Tensor want =
          optest::run("Cast", {x}, {attr_i("to", static_cast<int64_t>(to))}, 1, 19)[0];
      Tensor got(to, x.shape());
      tw::cast(from, to, x.raw(), got.raw(), x.numel());
      expect_same_bytes(
          got, want,
          "Cast " + std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
    }
  }
  EXPECT_THROW(tw::cast(DType::kUInt16, DType::kFloat32, nullptr, nullptr, 0), Error);
}

// ---------------------------------------------------------------- pooling

struct PoolCase {
  Dims x_shape;  // [N, C, H, W]
  Dims kernel, strides, pads, dilations;
  int64_t ceil_mode = 0;
};

// The 2-D geometry of a case, as nn::window_geometry resolves it (auto_pad NOTSET).
tw::PoolGeometry geometry(const PoolCase& c) {
  tw::PoolGeometry g;
  for (int i = 0; i < 2; ++i) {
    const int s = i + 1;
    const int64_t in = c.x_shape[2 + i];
    const int64_t eff = (c.kernel[i] - 1) * c.dilations[i] + 1;
    const int64_t span = in + c.pads[i] + c.pads[i + 2] - eff;
    g.image[s] = in;
    g.cols[s] = 1 + (c.ceil_mode ? (span + c.strides[i] - 1) / c.strides[i] : span / c.strides[i]);
    g.kernel[s] = c.kernel[i];
    g.stride[s] = c.strides[i];
    g.dilation[s] = c.dilations[i];
    g.pad[s] = c.pads[i];
    g.pad_end[s] = c.pads[i + 2];
  }
  return g;
}

std::vector<plan::Attribute> pool_attrs(const PoolCase& c) {
  return {attr_ints("kernel_shape", c.kernel), attr_ints("strides", c.strides),
          attr_ints("pads", c.pads), attr_ints("dilations", c.dilations),
          attr_i("ceil_mode", c.ceil_mode)};
}

const std::vector<PoolCase>& pool_cases() {
  static const std::vector<PoolCase> cases = {
      {{2, 3, 9, 8}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0},
      {{1, 2, 10, 11}, {2, 3}, {1, 2}, {0, 1, 1, 0}, {2, 1}, 1},
      {{2, 2, 7, 7}, {3, 2}, {3, 1}, {2, 0, 2, 1}, {1, 2}, 1},
      {{1, 3, 5, 6}, {2, 2}, {1, 1}, {2, 0, 0, 0}, {1, 1}, 0},  // the first windows are all padding
      {{1, 1, 6, 6}, {6, 6}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 0},
      {{2, 3, 2, 2}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0},     // every window reaches padding
      {{4, 16, 32, 32}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0},  // planes in parallel
  };
  return cases;
}

// Random values on a coarse grid so that windows hold ties (first-maximum rule, +-0).
Tensor tied(DType t, const Dims& shape, uint32_t seed) {
  Tensor x = random(DType::kFloat64, shape, seed, -3, 3);
  std::vector<double> v = optest::values(x);
  for (double& e : v) e = std::round(e * 2) / 2;
  if (t == DType::kUInt8 || t == DType::kInt8)
    for (double& e : v) e = std::round(e * 10) + (t == DType::kUInt8 ? 40 : 0);
  return optest::make(t, shape, v);
}

TEST(TwinPool, MaxPoolWithAndWithoutIndicesMatchesCpuOp) {
  uint32_t seed = 120;
  for (const PoolCase& c : pool_cases()) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kUInt8, DType::kInt8,
                    DType::kFloat64}) {
      const Tensor x = tied(t, c.x_shape, seed++);
      const int64_t planes = c.x_shape[0] * c.x_shape[1];
      const tw::PoolGeometry g = geometry(c);
      for (int64_t order : {0, 1}) {
        auto attrs = pool_attrs(c);
        attrs.push_back(attr_i("storage_order", order));
        const auto want = optest::run("MaxPool", {x}, attrs, 2, 12);
        Tensor y(t, want[0].shape()), idx(DType::kInt64, want[1].shape());
        tw::max_pool(t, g, planes, x.raw(), y.raw(), idx.data<int64_t>(), order == 1);
        expect_same_bytes(y, want[0], "MaxPool Y " + std::string(dtype_name(t)));
        expect_same_bytes(idx, want[1], "MaxPool Indices");
      }
      const Tensor want = optest::run("MaxPool", {x}, pool_attrs(c), 1, 12)[0];
      Tensor y(t, want.shape());
      tw::max_pool(t, g, planes, x.raw(), y.raw(), nullptr, false);
      expect_same_bytes(y, want, "MaxPool without indices " + std::string(dtype_name(t)));
    }
  }
}

TEST(TwinPool, AveragePoolMatchesCpuOpBitForBit) {
  uint32_t seed = 140;
  for (const PoolCase& c : pool_cases()) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
      const Tensor x = random(t, c.x_shape, seed++);
      for (int64_t include : {0, 1}) {
        auto attrs = pool_attrs(c);
        attrs.push_back(attr_i("count_include_pad", include));
        const Tensor want = optest::run("AveragePool", {x}, attrs, 1, 19)[0];
        Tensor y(t, want.shape());
        tw::average_pool(t, geometry(c), c.x_shape[0] * c.x_shape[1], x.raw(), y.raw(),
                         include != 0);
        expect_same_bytes(y, want, "AveragePool " + std::string(dtype_name(t)));
      }
    }
  }
}

TEST(TwinPool, PoolGradientsMatchCpuOpsBitForBit) {
  uint32_t seed = 160;
  for (const PoolCase& c : pool_cases()) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      const Tensor x = tied(t, c.x_shape, seed++);
      const Tensor y = optest::run("MaxPool", {x}, pool_attrs(c), 1, 12)[0];
      const Tensor dy = random(t, y.shape(), seed++);
      const int64_t planes = c.x_shape[0] * c.x_shape[1];
      const Tensor want = optest::run("MaxPoolGrad", {dy, x}, pool_attrs(c), 1, 1, "ampc")[0];
      Tensor dx(t, x.shape());
      tw::max_pool_grad(t, geometry(c), planes, x.raw(), dy.raw(), dx.raw());
      expect_same_bytes(dx, want, "MaxPoolGrad " + std::string(dtype_name(t)));
      for (int64_t include : {0, 1}) {
        auto attrs = pool_attrs(c);
        attrs.push_back(attr_i("count_include_pad", include));
        const Tensor want_avg = optest::run("AveragePoolGrad", {dy, x}, attrs, 1, 1, "ampc")[0];
        Tensor dx_avg(t, x.shape());
        tw::average_pool_grad(t, geometry(c), planes, dy.raw(), dx_avg.raw(), include != 0);
        expect_same_bytes(dx_avg, want_avg, "AveragePoolGrad " + std::string(dtype_name(t)));
      }
    }
  }
}

TEST(TwinPool, GlobalAveragePoolMatchesCpuOpBitForBit) {
  uint32_t seed = 180;
  for (const Dims& shape :
       {Dims{2, 3, 7, 5}, Dims{1, 4, 40, 40}, Dims{3, 2, 1, 1}, Dims{32, 64, 4, 4}}) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
      const Tensor x = random(t, shape, seed++);
      const Tensor want = optest::run("GlobalAveragePool", {x}, {}, 1, 1)[0];
      Tensor y(t, want.shape());
      tw::global_average_pool(t, shape[0] * shape[1], shape[2] * shape[3], x.raw(), y.raw());
      expect_same_bytes(y, want, "GlobalAveragePool " + std::string(dtype_name(t)));
    }
  }
}

// The CUDA block's reduction written out lane by lane: 256 threads, thread t's sum of elements
// t, t + 256, ... (+0 for a thread past the plane), then the tree over all 256 lanes. The twin
// computes only the live lanes; the bits must be these, signed zeros included.
template <typename T>
void block_reduction_means(const T* x, int64_t planes, int64_t spatial, T* y) {
  namespace pm = ampc::kernels::shared::pool;
  using E = pm::PoolElem<T>;
  using M = typename E::Math;
  for (int64_t pl = 0; pl < planes; ++pl) {
    M v[pm::kGlobalThreads];
    for (int t = 0; t < pm::kGlobalThreads; ++t)
      v[t] = pm::thread_sum(x + pl * spatial, spatial, t);
    for (int off = pm::kGlobalThreads / 2; off > 0; off /= 2) {
      for (int l = 0; l < off; ++l) v[l] = ampc::kernels::shared::add(v[l], v[l + off]);
    }
    y[pl] = E::store(pm::global_mean(v[0], spatial));
  }
}

TEST(TwinPool, GlobalAveragePoolIsTheBlockReductionBitForBit) {
  uint32_t seed = 190;
  for (int64_t spatial : {1, 2, 3, 4, 5, 7, 16, 49, 100, 255, 256, 257, 600, 1600}) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
      SCOPED_TRACE(std::to_string(spatial) + " " + std::string(dtype_name(t)));
      // Magnitudes from 1e-6 to 1e6, so that another order of the sums rounds differently;
      // a plane of -0 (its mean is +0: the block adds +0 to it) and one with a -0 first.
      const int64_t planes = 5;
      std::vector<double> v = optest::pseudo_random(static_cast<size_t>(planes * spatial), seed++);
      for (size_t i = 0; i < v.size(); ++i) v[i] *= std::pow(10.0, static_cast<double>(i % 13) - 6);
      for (int64_t i = 0; i < spatial; ++i) v[static_cast<size_t>(i)] = -0.0;
      v[static_cast<size_t>(spatial)] = -0.0;
      const Tensor x = optest::make(t, {planes, spatial}, v);
      Tensor got(t, {planes}), want(t, {planes});
      tw::global_average_pool(t, planes, spatial, x.raw(), got.raw());
      if (t == DType::kFloat32) {
        block_reduction_means(x.data<float>(), planes, spatial, want.data<float>());
      } else if (t == DType::kFloat16) {
        block_reduction_means(x.data<Half>(), planes, spatial, want.data<Half>());
      } else if (t == DType::kBFloat16) {
        block_reduction_means(x.data<BFloat16>(), planes, spatial, want.data<BFloat16>());
      } else {
        block_reduction_means(x.data<double>(), planes, spatial, want.data<double>());
      }
      expect_same_bytes(got, want, "GlobalAveragePool");
      EXPECT_FALSE(std::signbit(optest::values(got)[0])) << "the block's mean of -0 is +0";
    }
  }
}

// tied() with every seventh value NaN (max: a NaN first tap stays, a later NaN never wins).
Tensor tied_with_nans(DType t, const Dims& shape, uint32_t seed) {
  std::vector<double> v = optest::values(tied(t, shape, seed));
  for (size_t i = 3; i < v.size(); i += 7) v[i] = std::nan("");
  return optest::make(t, shape, v);
}

// The pooling twins' loops (a row of outputs at a time, the argmax across a row's interior
// outputs side by side, gradients scattered in output order) against pool_math.h's per-index
// functors, which the CUDA kernels run one thread per index: ties, NaNs, both storage orders.
TEST(TwinPool, HostLoopsMatchThePerIndexFunctorsBitForBit) {
  namespace pm = ampc::kernels::shared::pool;
  uint32_t seed = 190;
  for (const PoolCase& c : pool_cases()) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
      const Tensor x = seed % 2 ? tied_with_nans(t, c.x_shape, seed++) : tied(t, c.x_shape, seed++);
      const tw::PoolGeometry g = geometry(c);
      const int64_t planes = c.x_shape[0] * c.x_shape[1];
      const Tensor y = optest::run("MaxPool", {x}, pool_attrs(c), 1, 12)[0];
      const Tensor dy = random(t, y.shape(), seed++);
      const std::string what(dtype_name(t));
      for (bool avg : {false, true}) {
        Tensor got(t, y.shape()), want(t, y.shape());
        if (avg) {
          tw::average_pool(t, g, planes, x.raw(), got.raw(), true);
          pm::run_pool<true>(tw::IndexLoop{}, "", t, g, planes, x.raw(), want.raw(), true, nullptr,
                             false);
        } else {
          tw::max_pool(t, g, planes, x.raw(), got.raw(), nullptr, false);
          pm::run_pool<false>(tw::IndexLoop{}, "", t, g, planes, x.raw(), want.raw(), false,
                              nullptr, false);
        }
        expect_same_bytes(got, want, (avg ? "AveragePool " : "MaxPool ") + what);
        for (bool column_major : {false, true}) {
          if (avg) break;
          Tensor iy(t, y.shape()), wy(t, y.shape());
          Tensor idx(DType::kInt64, y.shape()), widx(DType::kInt64, y.shape());
          tw::max_pool(t, g, planes, x.raw(), iy.raw(), idx.data<int64_t>(), column_major);
          pm::run_pool<false>(tw::IndexLoop{}, "", t, g, planes, x.raw(), wy.raw(), false,
                              widx.data<int64_t>(), column_major);
          expect_same_bytes(iy, wy, "MaxPool with indices " + what);
          expect_same_bytes(idx, widx, "MaxPool indices " + what);
        }
        Tensor dgot(t, x.shape()), dwant(t, x.shape());
        if (avg) {
          tw::average_pool_grad(t, g, planes, dy.raw(), dgot.raw(), false);
        } else {
          tw::max_pool_grad(t, g, planes, x.raw(), dy.raw(), dgot.raw());
        }
        if (avg) {
          pm::run_pool_grad<true>(tw::IndexLoop{}, "", t, g, planes, x.raw(), dy.raw(), dwant.raw(),
                                  false);
        } else {
          pm::run_pool_grad<false>(tw::IndexLoop{}, "", t, g, planes, x.raw(), dy.raw(),
                                   dwant.raw(), false);
        }
        expect_same_bytes(dgot, dwant, (avg ? "AveragePoolGrad " : "MaxPoolGrad ") + what);
      }
    }
  }
}

// ---------------------------------------------------------------- Reductions

// ReduceSum ... ReduceSumSquare on float data are the twin in the CPU backend: the op through
// the registry equals a direct call of tw::reduce, bit for bit, in every float dtype and for
// every partition (rows, rows in pieces, columns with and without pieces, per channel,
// several reduced groups), small (serial) and large (parallel).
TEST(TwinReduce, ReduceOpsMatchTheTwinBitForBit) {
  const char* const ops[] = {"ReduceSum", "ReduceMean",   "ReduceProd",
                             "ReduceMax", "ReduceMin",    "ReduceL1",
                             "ReduceL2",  "ReduceLogSum", "ReduceSumSquare"};
  const std::vector<std::pair<Dims, Dims>> cases = {
      {{6, 50}, {1}},           {{3, 40000}, {1}},
      {{1, 300000}, {1}},       {{512, 96}, {0}},
      {{4, 30, 7}, {1}},        {{4, 30, 7}, {0, 2}},
      {{5, 6, 7}, {}},          {{2, 3, 4, 5}, {0, 2}},
      {{2, 1, 9}, {0, 1}},      {{4096, 3}, {0}},
      {{64, 2048}, {0}},        {{16, 8, 14, 14}, {0, 2, 3}},
      {{2, 3, 70000}, {0, 2}},  {{32, 64, 16, 16}, {0, 2, 3}},
      {{8, 40, 30, 20}, {1, 3}}};
  uint32_t seed = 300;
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    for (const auto& [shape, axes] : cases) {
      const int rank = static_cast<int>(shape.size());
      bool reduced[8] = {};
      for (int i = 0; i < rank; ++i) reduced[i] = axes.empty();
      for (int64_t a : axes) reduced[a] = true;
      Dims out;
      for (int i = 0; i < rank; ++i)
        if (!reduced[i]) out.push_back(shape[i]);
      for (int op = 0; op < 9; ++op) {
        // Prod near 1, LogSum of positive terms; Max / Min meet a NaN in large inputs.
        Tensor x = op == 2   ? random(t, shape, seed++, 0.999, 1.001)
                   : op == 7 ? random(t, shape, seed++, 0.1, 4)
                             : random(t, shape, seed++);
        if ((op == 3 || op == 4) && count(shape) > 100) {
          std::vector<double> v = optest::values(x);
          v[v.size() / 2] = std::nan("");
          x = optest::make(t, shape, v);
        }
        const std::string what = std::string(ops[op]) + " " + x.type_str();
        const Tensor want =
            optest::run(ops[op], {x, ints(axes)}, {attr_i("keepdims", 0)}, 1, 18)[0];
        Tensor got(t, out);
        const auto rop = static_cast<tw::ReduceOp>(op);
        std::vector<double> ws(tw::reduce_workspace_bytes(rop, t, rank, shape.data(), reduced) / 8 +
                               1);
        tw::reduce(rop, t, x.raw(), got.raw(), rank, shape.data(), reduced, ws.data());
        expect_same_bytes(got, want, what);
      }
    }
  }
}

// ---------------------------------------------------------------- BatchNormalization

TEST(TwinBatchNorm, TrainingModeOutputsMatchCpuOpBitForBit) {
  uint32_t seed = 200;
  for (const Dims& shape :
       {Dims{4, 3, 5, 6}, Dims{2, 5, 70, 70}, Dims{8, 2}, Dims{32, 64, 16, 16}}) {
    const int64_t n = shape[0], c = shape[1], spatial = count(shape) / (n * c);
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
      const Tensor x = random(t, shape, seed++, -3, 5);
      const Tensor scale = random(DType::kFloat32, {c}, seed++, 0.5, 2);
      const Tensor bias = random(DType::kFloat32, {c}, seed++);
      const Tensor mean = random(DType::kFloat32, {c}, seed++);
      const Tensor var = random(DType::kFloat32, {c}, seed++, 0.5, 2);
      const auto want = optest::run(
          "BatchNormalization", {x, scale, bias, mean, var},
          {attr_f("epsilon", 1e-3f), attr_f("momentum", 0.8f), attr_i("training_mode", 1)}, 3, 15);
      Tensor y(t, shape), rm(DType::kFloat32, {c}), rv(DType::kFloat32, {c});
      std::vector<char> ws(tw::batch_norm_training_workspace_bytes(n, c, spatial));
      tw::batch_norm_training(t, DType::kFloat32, DType::kFloat32, x.raw(), n, c, spatial,
                              scale.raw(), bias.raw(), mean.raw(), var.raw(), 1e-3f, 0.8f, y.raw(),
                              rm.raw(), rv.raw(), nullptr, nullptr, ws.data());
      ASSERT_EQ(want[1].dtype(), DType::kFloat32);
      const std::string what = "BatchNormalization training " + std::string(dtype_name(t));
      expect_same_bytes(y, want[0], what + " Y");
      expect_same_bytes(rm, want[1], what + " running_mean");
      expect_same_bytes(rv, want[2], what + " running_var");
    }
  }
}

TEST(TwinBatchNorm, SavedStatisticsBeforeOpset14AndInferenceMatchCpuOpBitForBit) {
  const Dims shape = {3, 4, 6, 5};
  const int64_t n = 3, c = 4, spatial = 30;
  const Tensor x = random(DType::kFloat32, shape, 220, -2, 6);
  const Tensor scale = random(DType::kFloat32, {c}, 221, 0.5, 2);
  const Tensor bias = random(DType::kFloat32, {c}, 222);
  const Tensor mean = random(DType::kFloat32, {c}, 223);
  const Tensor var = random(DType::kFloat32, {c}, 224, 0.5, 2);
  const auto want = optest::run("BatchNormalization", {x, scale, bias, mean, var},
                                {attr_f("momentum", 0.9f)}, 5, 9);
  Tensor y(DType::kFloat32, shape), rm(DType::kFloat32, {c}), rv(DType::kFloat32, {c}),
      sm(DType::kFloat32, {c}), sv(DType::kFloat32, {c});
  std::vector<char> ws(tw::batch_norm_training_workspace_bytes(n, c, spatial));
  tw::batch_norm_training(DType::kFloat32, DType::kFloat32, DType::kFloat32, x.raw(), n, c, spatial,
                          scale.raw(), bias.raw(), mean.raw(), var.raw(), 1e-5f, 0.9f, y.raw(),
                          rm.raw(), rv.raw(), sm.raw(), sv.raw(), ws.data());
  const Tensor* got[] = {&y, &rm, &rv, &sm, &sv};
  for (int i = 0; i < 5; ++i)
    expect_same_bytes(*got[i], want[i], "BatchNormalization-9 output " + std::to_string(i));

  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    const Tensor xt = random(t, shape, 230 + static_cast<uint32_t>(t));
    const Tensor want_inf =
        optest::run("BatchNormalization", {xt, scale, bias, mean, var}, {}, 1, 15)[0];
    Tensor yi(t, shape);
    tw::batch_norm_inference(t, DType::kFloat32, DType::kFloat32, xt.raw(), n, c, spatial,
                             scale.raw(), bias.raw(), mean.raw(), var.raw(), 1e-5f, yi.raw());
    // Inference has no sum: the same operations as the CPU op, the same bits (f64: the fp32
    // parameters are widened exactly either way).
    expect_same_bytes(yi, want_inf, "BatchNormalization inference " + std::string(dtype_name(t)));
  }
}

// ampc.BatchNormalizationGrad (the backward of training mode, the CPU op is the twin) against
// PyTorch's formula evaluated in double on the same (rounded) inputs: dB = sum(dY), dScale =
// sum(dY xhat), dX = scale / std (dY - mean(dY) - xhat mean(dY xhat)). Shapes with one chunk
// per channel (one value or several per thread) and with several (70x70 and 16x16 maps),
// single positions and 2x2 maps.
// The bound: fp32 sums of a few thousand terms (1e-4 of the largest magnitude), plus one
// rounding of a 16-bit dX.
TEST(TwinBatchNorm, GradientMatchesDoubleFormula) {
  uint32_t seed = 300;
  for (const Dims& shape : {Dims{4, 3, 5, 6}, Dims{2, 5, 70, 70}, Dims{8, 2}, Dims{32, 16, 2, 2},
                            Dims{32, 8, 8, 8}, Dims{20, 3, 7, 5}, Dims{32, 8, 16, 16}}) {
    const int64_t n = shape[0], c = shape[1], spatial = count(shape) / (n * c), cnt = n * spatial;
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " shape of " + std::to_string(count(shape)));
      const DType p = t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
      const Tensor x = random(t, shape, seed++, -3, 5);
      const Tensor dy = random(t, shape, seed++);
      const Tensor scale = random(p, {c}, seed++, 0.5, 2);
      const double eps = 1e-3;
      const auto got = optest::run("BatchNormalizationGrad", {dy, x, scale},
                                   {attr_f("epsilon", static_cast<float>(eps))}, 3, 1, "ampc");
      ASSERT_EQ(got[0].dtype(), t);
      ASSERT_EQ(got[1].dtype(), p);
      const std::vector<double> xv = optest::values(x), gv = optest::values(dy),
                                sv = optest::values(scale);
      std::vector<double> dx(xv.size()), ds(c), db(c);
      for (int64_t ch = 0; ch < c; ++ch) {
        auto at = [&](int64_t e) { return (e / spatial * c + ch) * spatial + e % spatial; };
        double m = 0, v = 0, sdy = 0, sdyx = 0;
        for (int64_t e = 0; e < cnt; ++e) m += xv[at(e)];
        m /= static_cast<double>(cnt);
        for (int64_t e = 0; e < cnt; ++e) v += (xv[at(e)] - m) * (xv[at(e)] - m);
        const double inv = 1 / std::sqrt(v / static_cast<double>(cnt) + eps);
        for (int64_t e = 0; e < cnt; ++e) {
          sdy += gv[at(e)];
          sdyx += gv[at(e)] * (xv[at(e)] - m) * inv;
        }
        db[ch] = sdy;
        ds[ch] = sdyx;
        for (int64_t e = 0; e < cnt; ++e) {
          const double xhat = (xv[at(e)] - m) * inv;
          dx[at(e)] = sv[ch] * inv * (gv[at(e)] - sdy / cnt - xhat * sdyx / cnt);
        }
      }
      const double tol = t == DType::kFloat64 ? 1e-10 : 1e-4;
      const double ulp = t == DType::kFloat16 ? 0x1p-11 : t == DType::kBFloat16 ? 0x1p-8 : 0;
      auto check = [&](const std::vector<double>& want, const Tensor& have, double unit,
                       const char* what) {
        const std::vector<double> hv = optest::values(have);
        double largest = 0;
        for (double w : want) largest = std::max(largest, std::fabs(w));
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_LE(std::fabs(hv[i] - want[i]), tol * largest + unit * std::fabs(want[i]))
              << what << " " << i << ": " << hv[i] << " vs " << want[i];
      };
      check(dx, got[0], ulp, "dX");
      check(ds, got[1], 0, "dScale");
      check(db, got[2], 0, "dB");
    }
  }
}

// The same op bit for bit against the CUDA kernels' order written out with their own per-thread
// functions (batchnorm_math.h): per channel and chunk, 256 thread values (thread_sum, then
// thread_grad_sums about the mean) and block_tree_sum's tree (a warp's halving over 256),
// then finish_grad_channel and grad_dx; and the forward: its saved statistics, Y and the
// running statistics. The twin walks elements in memory order, or chunks of sixteen channels
// side by side (batchnorm.cc; with AVX-512 batchnorm_avx512.cc: runs starting anywhere in a
// vector of 16 threads, gathers across planes); this checks that those are the kernels' sums
// (one chunk and several per channel, few channels and many, a last group of fewer than
// sixteen, more elements than threads, maps of 1, 2, 4, 8, 9, 30 positions and more, and two
// shapes large enough to run on several threads).
TEST(TwinBatchNorm, GradientInTheKernelsOrderBitForBit) {
  namespace bn = ampc::kernels::shared::bn;
  using M = float;
  uint32_t seed = 400;
  for (const Dims& shape :
       {Dims{4, 3, 5, 6}, Dims{32, 8, 8, 8}, Dims{32, 16, 2, 2}, Dims{8, 2}, Dims{2, 5, 70, 70},
        Dims{20, 3, 7, 5}, Dims{32, 8, 16, 16}, Dims{16, 9, 32, 32}, Dims{300, 40},
        Dims{96, 24, 3, 3}, Dims{8, 20, 1, 1}, Dims{3, 7, 33, 1}, Dims{40, 12, 2, 1},
        Dims{64, 10, 8, 1}, Dims{8, 20, 64, 64}, Dims{4096, 160}}) {
    const int64_t n = shape[0], c = shape[1], spatial = count(shape) / (n * c), cnt = n * spatial;
    for (DType t : {DType::kFloat32, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " shape of " + std::to_string(count(shape)));
      const Tensor x = random(t, shape, seed++, -3, 5);
      const Tensor dy = random(t, shape, seed++);
      const Tensor scale = random(DType::kFloat32, {c}, seed++, 0.5, 2);
      const auto got = optest::run("BatchNormalizationGrad", {dy, x, scale},
                                   {attr_f("epsilon", 1e-3f)}, 3, 1, "ampc");
      const int64_t splits = bn::stat_splits(n, c, spatial);
      std::vector<M> part_sum(c * splits), part_sq(c * splits), part_dy(c * splits),
          part_dyx(c * splits);
      auto block = [](M* v) {
        ampc::kernels::shared::warp_tree_host(
            v, bn::kThreads, [](M a, M b) { return ampc::kernels::shared::add(a, b); });
        return v[0];
      };
      Tensor dx(t, shape), ds(DType::kFloat32, {c}), db(DType::kFloat32, {c});
      std::vector<bn::GradCoefficients<M>> coef(c);
      auto run = [&](auto tag) {
        using T = decltype(tag);
        const T* xs = static_cast<const T*>(x.raw());
        const T* gs = static_cast<const T*>(dy.raw());
        for (int64_t ch = 0; ch < c; ++ch) {
          for (int64_t s = 0; s < splits; ++s) {
            int64_t begin, end;
            bn::chunk_range(cnt, splits, s, &begin, &end);
            M v[bn::kThreads];
            for (int u = 0; u < bn::kThreads; ++u)
              v[u] = bn::thread_sum<M>(xs, ch, c, spatial, begin, end, u);
            part_sum[ch * splits + s] = block(v);
          }
          const M m = bn::combine_mean(part_sum.data() + ch * splits, splits, cnt);
          for (int64_t s = 0; s < splits; ++s) {
            int64_t begin, end;
            bn::chunk_range(cnt, splits, s, &begin, &end);
            M q[bn::kThreads], a[bn::kThreads], b[bn::kThreads];
            for (int u = 0; u < bn::kThreads; ++u)
              bn::thread_grad_sums<M>(xs, gs, ch, c, spatial, begin, end, u, m, &q[u], &a[u],
                                      &b[u]);
            part_sq[ch * splits + s] = block(q);
            part_dy[ch * splits + s] = block(a);
            part_dyx[ch * splits + s] = block(b);
          }
          bn::finish_grad_channel<M>(
              ch, splits, cnt, part_sum.data(), part_sq.data(), part_dy.data(), part_dyx.data(),
              static_cast<const float*>(scale.raw()), M(1e-3f), static_cast<float*>(ds.raw()),
              static_cast<float*>(db.raw()), &coef[ch]);
        }
        T* out = static_cast<T*>(dx.raw());
        for (int64_t k = 0; k < count(shape); ++k)
          bn::b_store(
              out, k,
              bn::grad_dx(coef[k / spatial % c], bn::b_load<M>(xs, k), bn::b_load<M>(gs, k)));
      };
      if (t == DType::kFloat32) {
        run(float{});
      } else {
        run(BFloat16{});
      }
      expect_same_bytes(dx, got[0], "dX");
      expect_same_bytes(ds, got[1], "dScale");
      expect_same_bytes(db, got[2], "dB");
      // Training-mode forward: Y = a x + b with a, b folded from these statistics, and the
      // running statistics updated with them.
      {
        const Tensor bias = random(DType::kFloat32, {c}, seed++);
        const Tensor rmean = random(DType::kFloat32, {c}, seed++);
        const Tensor rvar = random(DType::kFloat32, {c}, seed++, 0.5, 2);
        const auto fwd = optest::run(
            "BatchNormalization", {x, scale, bias, rmean, rvar},
            {attr_f("epsilon", 1e-3f), attr_f("momentum", 0.8f), attr_i("training_mode", 1)}, 3,
            15);
        Tensor y(t, shape), rm(DType::kFloat32, {c}), rv(DType::kFloat32, {c});
        std::vector<M> a(c), b(c);
        for (int64_t ch = 0; ch < c; ++ch) {
          bn::finish_channel<M>(
              ch, splits, cnt, part_sum.data(), part_sq.data(),
              static_cast<const float*>(scale.raw()), static_cast<const float*>(bias.raw()),
              static_cast<const float*>(rmean.raw()), static_cast<const float*>(rvar.raw()),
              M(1e-3f), M(0.8f), static_cast<float*>(rm.raw()), static_cast<float*>(rv.raw()),
              static_cast<float*>(nullptr), static_cast<float*>(nullptr), &a[ch], &b[ch]);
        }
        auto affine = [&](auto tag) {
          using T = decltype(tag);
          const T* xs = static_cast<const T*>(x.raw());
          T* out = static_cast<T*>(y.raw());
          for (int64_t k = 0; k < count(shape); ++k) {
            const int64_t ch = k / spatial % c;
            bn::b_store(out, k, bn::affine(a[ch], b[ch], bn::b_load<M>(xs, k)));
          }
        };
        if (t == DType::kFloat32) {
          affine(float{});
        } else {
          affine(BFloat16{});
        }
        expect_same_bytes(y, fwd[0], "Y");
        expect_same_bytes(rm, fwd[1], "running mean");
        expect_same_bytes(rv, fwd[2], "running variance");
      }
      if (t != DType::kFloat32) continue;
      // The forward's statistics (opset 9's saved mean and variance) from the same sums.
      const Tensor zero = random(DType::kFloat32, {c}, seed++, 0.5, 2);
      const auto fwd = optest::run("BatchNormalization", {x, scale, zero, zero, zero},
                                   {attr_f("epsilon", 1e-3f)}, 5, 9);
      Tensor mean(DType::kFloat32, {c}), var(DType::kFloat32, {c});
      for (int64_t ch = 0; ch < c; ++ch) {
        static_cast<float*>(mean.raw())[ch] =
            bn::combine_mean(part_sum.data() + ch * splits, splits, cnt);
        static_cast<float*>(var.raw())[ch] =
            bn::combine_mean(part_sq.data() + ch * splits, splits, cnt);
      }
      expect_same_bytes(mean, fwd[3], "saved mean");
      expect_same_bytes(var, fwd[4], "saved variance");
    }
  }
}

// The convolution's bias kernel (kernels/cuda/bias.h, which the CUDA backend uses instead of
// cudnnAddTensor): y [n, c, s] + b [c] equals the CPU backend's Add of b as [1, c, 1], bit
// for bit (fp32 math, one rounding), in every float precision.
TEST(TwinBias, ChannelBiasMatchesCpuAddBitForBit) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (const Dims& d : {Dims{4, 6, 25}, Dims{1, 3, 1}, Dims{2, 5, 7}}) {
      const int64_t count = d[0] * d[1] * d[2];
      const Tensor y = optest::make(t, d, optest::pseudo_random(static_cast<size_t>(count), 7));
      const Tensor b =
          optest::make(t, {1, d[1], 1}, optest::pseudo_random(static_cast<size_t>(d[1]), 8));
      const Tensor want = optest::run("Add", {y, b}, {}, 1, 17)[0];
      Tensor got = y;
      tw::add_channel_bias(t, got.raw(), b.raw(), d[0], d[1], d[2]);
      ASSERT_EQ(0, std::memcmp(got.raw(), want.raw(), want.nbytes()))
          << dtype_name(t) << " " << optest::values(got)[0] << " vs " << optest::values(want)[0];
    }
  }
}

}  // namespace
}  // namespace ampc::rt::cpu
