// CPU operators of the nn family (MatMul, Gemm, Conv, ConvTranspose, pooling, normalisation)
// run through the operator registry on hand-built plan steps, against hand-computed values
// and naive references written here (direct convolution, per-element formulas).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "runtime/cpu/op_registry.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::rt::cpu {
namespace {

using namespace optest;  // NOLINT
using ::testing::HasSubstr;
constexpr DType F32 = DType::kFloat32;
constexpr DType F64 = DType::kFloat64;
constexpr DType I64 = DType::kInt64;

std::vector<int64_t> shape_of(const Tensor& t) {
  return t.shape();
}

// ---------------------------------------------------------------------------------------
// MatMul and Gemm

// Naive batched matmul over already broadcast operands [b, m, k] x [b, k, n].
std::vector<double> naive_bmm(const std::vector<double>& a, const std::vector<double>& b,
                              int64_t batch, int64_t m, int64_t k, int64_t n) {
  std::vector<double> c(batch * m * n, 0.0);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t q = 0; q < k; ++q)
          c[(p * m + i) * n + j] += a[(p * m + i) * k + q] * b[(p * k + q) * n + j];
  return c;
}

TEST(CpuNn, MatMul2dByHand) {
  auto y =
      run("MatMul", {make(F32, {2, 3}, {1, 2, 3, 4, 5, 6}), make(F32, {3, 2}, {1, 0, 0, 1, 1, 1})},
          {}, 1, 13)[0];
  EXPECT_EQ(shape_of(y), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values(y), (std::vector<double>{4, 5, 10, 11}));
}

TEST(CpuNn, MatMulBroadcastsBatchDimensions) {
  // a [2, 1, 2, 3] x b [3, 3, 2] -> [2, 3, 2, 2]
  const auto av = pseudo_random(12, 1), bv = pseudo_random(18, 2);
  auto y = run("MatMul", {make(F32, {2, 1, 2, 3}, av), make(F32, {3, 3, 2}, bv)}, {}, 1, 13)[0];
  ASSERT_EQ(shape_of(y), (std::vector<int64_t>{2, 3, 2, 2}));
  std::vector<double> a_full, b_full;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      a_full.insert(a_full.end(), av.begin() + i * 6, av.begin() + i * 6 + 6);
      b_full.insert(b_full.end(), bv.begin() + j * 6, bv.begin() + j * 6 + 6);
    }
  expect_close(values(y), naive_bmm(a_full, b_full, 6, 2, 3, 2), 1e-6);
}

TEST(CpuNn, MatMulStacksBatchesAgainstOneMatrix) {
  const auto av = pseudo_random(4 * 5 * 6, 3), bv = pseudo_random(6 * 7, 4);
  auto y = run("MatMul", {make(F64, {4, 5, 6}, av), make(F64, {6, 7}, bv)}, {}, 1, 13)[0];
  std::vector<double> b_full;
  for (int i = 0; i < 4; ++i) b_full.insert(b_full.end(), bv.begin(), bv.end());
  expect_close(values(y), naive_bmm(av, b_full, 4, 5, 6, 7), 1e-12);
}

TEST(CpuNn, MatMulVectorOperands) {
  const Tensor v = make(F32, {3}, {1, 2, 3});
  const Tensor m = make(F32, {3, 2}, {1, 2, 3, 4, 5, 6});
  auto vm = run("MatMul", {v, m}, {}, 1, 13)[0];
  EXPECT_EQ(shape_of(vm), (std::vector<int64_t>{2}));
  EXPECT_EQ(values(vm), (std::vector<double>{22, 28}));
  auto mv = run("MatMul", {make(F32, {2, 3}, {1, 2, 3, 4, 5, 6}), v}, {}, 1, 13)[0];
  EXPECT_EQ(shape_of(mv), (std::vector<int64_t>{2}));
  EXPECT_EQ(values(mv), (std::vector<double>{14, 32}));
  auto vv = run("MatMul", {v, v}, {}, 1, 13)[0];
  EXPECT_EQ(shape_of(vv), (std::vector<int64_t>{}));
  EXPECT_EQ(values(vv), (std::vector<double>{14}));
}

TEST(CpuNn, MatMulIntegers) {
  auto y = run("MatMul",
               {make(DType::kInt32, {2, 2}, {1, -2, 3, 4}), make(DType::kInt32, {2, 1}, {5, 6})},
               {}, 1, 13)[0];
  EXPECT_EQ(y.dtype(), DType::kInt32);
  EXPECT_EQ(values(y), (std::vector<double>{-7, 39}));
}

TEST(CpuNn, MatMulHalfAccumulatesInFloatAndRoundsOnce) {
  // fp16 has spacing 2 above 2048: adding 1 three times in fp16 would stay at 2048 (each
  // 2049 ties to even 2048); the fp32 sum 2051 rounded once ties to even 2052.
  const Tensor a = make(DType::kFloat16, {1, 4}, {2048, 1, 1, 1});
  const Tensor b = make(DType::kFloat16, {4, 1}, {1, 1, 1, 1});
  auto y = run("MatMul", {a, b}, {}, 1, 13)[0];
  EXPECT_EQ(y.dtype(), DType::kFloat16);
  EXPECT_EQ(values(y), (std::vector<double>{2052}));
  auto yb =
      run("MatMul",
          {make(DType::kBFloat16, {1, 2}, {1, 1.0 / 256}), make(DType::kBFloat16, {2, 1}, {1, 1})},
          {}, 1, 13)[0];
  EXPECT_EQ(yb.dtype(), DType::kBFloat16);
  EXPECT_EQ(values(yb), (std::vector<double>{1.0}));  // 1 + 2^-8 rounds to even in bf16
}

TEST(CpuNn, MatMulShapeErrorsNameTheNode) {
  const std::string msg = run_error(
      "MatMul",
      {make(F32, {2, 3}, std::vector<double>(6)), make(F32, {2, 3}, std::vector<double>(6))}, {}, 1,
      13);
  EXPECT_THAT(msg, HasSubstr("node 'test_node' (MatMul)"));
  EXPECT_THAT(msg, HasSubstr("do not match"));
}

TEST(CpuNn, GemmAllAttributes) {
  // Y = 0.5 * A^T B^T + 2 * C, A [3, 2] (transposed: 2x3), B [4, 3] (transposed: 3x4), C [4].
  const auto av = pseudo_random(6, 5), bv = pseudo_random(12, 6);
  const std::vector<double> cv = {1, 2, 3, 4};
  auto y =
      run("Gemm", {make(F32, {3, 2}, av), make(F32, {4, 3}, bv), make(F32, {4}, cv)},
          {attr_i("transA", 1), attr_i("transB", 1), attr_f("alpha", 0.5f), attr_f("beta", 2.0f)},
          1, 13)[0];
  ASSERT_EQ(shape_of(y), (std::vector<int64_t>{2, 4}));
  std::vector<double> want(8);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      double s = 0;
      for (int q = 0; q < 3; ++q) s += av[q * 2 + i] * bv[j * 3 + q];
      want[i * 4 + j] = 0.5 * s + 2.0 * cv[j];
    }
  expect_close(values(y), want, 1e-6);
}

TEST(CpuNn, LargeGemmsSplitAcrossThreadsMatchReference) {
  // Over 2^20 multiply-adds: split into row blocks (tall C) or column blocks (wide C).
  for (const auto& [m, n] : std::vector<std::pair<int64_t, int64_t>>{{300, 70}, {70, 300}}) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        const int64_t k = 60;
        const auto av = pseudo_random(m * k, 7), bv = pseudo_random(k * n, 8),
                   cv = pseudo_random(n, 9);
        auto y = run("Gemm",
                     {make(F32, ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, av),
                      make(F32, tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, bv),
                      make(F32, {n}, cv)},
                     {attr_i("transA", ta), attr_i("transB", tb), attr_f("beta", 0.5f)}, 1, 13)[0];
        std::vector<double> want(m * n);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = 0.5 * cv[j];
            for (int64_t q = 0; q < k; ++q)
              s += av[ta ? q * m + i : i * k + q] * bv[tb ? j * k + q : q * n + j];
            want[i * n + j] = s;
          }
        SCOPED_TRACE("m " + std::to_string(m) + " transA " + std::to_string(ta) + " transB " +
                     std::to_string(tb));
        expect_close(values(y), want, 1e-5);
      }
    }
  }
}

TEST(CpuNn, GemmBiasShapesAndNoBias) {
  const Tensor a = make(F32, {2, 2}, {1, 2, 3, 4});
  const Tensor eye = make(F32, {2, 2}, {1, 0, 0, 1});
  EXPECT_EQ(values(run("Gemm", {a, eye, make(F32, {}, {10})}, {}, 1, 13)[0]),
            (std::vector<double>{11, 12, 13, 14}));
  EXPECT_EQ(values(run("Gemm", {a, eye, make(F32, {2, 1}, {10, 20})}, {}, 1, 13)[0]),
            (std::vector<double>{11, 12, 23, 24}));
  EXPECT_EQ(values(run("Gemm", {a, eye}, {}, 1, 13)[0]), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(values(run("Gemm",
                       {make(I64, {2, 2}, {1, 2, 3, 4}), make(I64, {2, 2}, {1, 0, 0, 1}),
                        make(I64, {2}, {1, 1})},
                       {attr_f("alpha", 2.0f)}, 1, 13)[0]),
            (std::vector<double>{3, 5, 7, 9}));
  EXPECT_THAT(run_error("Gemm", {a, eye, make(F32, {3}, {1, 2, 3})}, {}, 1, 13),
              HasSubstr("does not broadcast"));
}

TEST(CpuNn, MatMulIntegerAndConvIntegerSubtractZeroPoints) {
  // (A - 2) x (B - [1, 0]) with A, B uint8; per-column zero point of B: B - zp = [[0, 2], [2, 4]].
  auto y =
      run("MatMulInteger",
          {make(DType::kUInt8, {2, 2}, {11, 7, 3, 5}), make(DType::kUInt8, {2, 2}, {1, 2, 3, 4}),
           make(DType::kUInt8, {}, {2}), make(DType::kUInt8, {2}, {1, 0})},
          {}, 1, 10)[0];
  EXPECT_EQ(y.dtype(), DType::kInt32);
  EXPECT_EQ(values(y),
            (std::vector<double>{9 * 0 + 5 * 2, 9 * 2 + 5 * 4, 1 * 0 + 3 * 2, 1 * 2 + 3 * 4}));
  auto c = run("ConvInteger",
               {make(DType::kUInt8, {1, 1, 2, 2}, {5, 6, 7, 8}),
                make(DType::kUInt8, {1, 1, 2, 2}, {1, 1, 1, 2}), make(DType::kUInt8, {}, {5})},
               {}, 1, 10)[0];
  EXPECT_EQ(c.dtype(), DType::kInt32);
  EXPECT_EQ(values(c), (std::vector<double>{0 + 1 + 2 + 3 * 2}));
}

// ---------------------------------------------------------------------------------------
// Conv and ConvTranspose against direct loops

struct ConvCase {
  std::vector<int64_t> x_shape;  // [n, c, spatial...]
  int64_t m, group;
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
};

// Direct convolution with explicit pads (begins, ends).
std::vector<double> naive_conv(const ConvCase& cc, const std::vector<double>& x,
                               const std::vector<double>& w, const std::vector<double>& b,
                               std::vector<int64_t>* out_shape) {
  const size_t ns = cc.kernel.size();
  // Pad everything to 3 spatial dims.
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, p[3] = {0, 0, 0},
          out[3] = {1, 1, 1};
  *out_shape = {cc.x_shape[0], cc.m};
  for (size_t i = 0; i < ns; ++i) {
    const size_t j = 3 - ns + i;
    in[j] = cc.x_shape[2 + i];
    k[j] = cc.kernel[i];
    s[j] = cc.strides[i];
    d[j] = cc.dilations[i];
    p[j] = cc.pads[i];
    out[j] = (in[j] + cc.pads[i] + cc.pads[i + ns] - (k[j] - 1) * d[j] - 1) / s[j] + 1;
    out_shape->push_back(out[j]);
  }
  const int64_t n = cc.x_shape[0], c = cc.x_shape[1], cg = c / cc.group, mg = cc.m / cc.group;
  std::vector<double> y;
  for (int64_t b0 = 0; b0 < n; ++b0)
    for (int64_t mo = 0; mo < cc.m; ++mo)
      for (int64_t o0 = 0; o0 < out[0]; ++o0)
        for (int64_t o1 = 0; o1 < out[1]; ++o1)
          for (int64_t o2 = 0; o2 < out[2]; ++o2) {
            double acc = b.empty() ? 0.0 : b[mo];
            const int64_t g = mo / mg;
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t k0 = 0; k0 < k[0]; ++k0)
                for (int64_t k1 = 0; k1 < k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t i0 = o0 * s[0] - p[0] + k0 * d[0];
                    const int64_t i1 = o1 * s[1] - p[1] + k1 * d[1];
                    const int64_t i2 = o2 * s[2] - p[2] + k2 * d[2];
                    if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2])
                      continue;
                    const int64_t xc = g * cg + ci;
                    acc += x[(((b0 * c + xc) * in[0] + i0) * in[1] + i1) * in[2] + i2] *
                           w[(((mo * cg + ci) * k[0] + k0) * k[1] + k1) * k[2] + k2];
                  }
            y.push_back(acc);
          }
  return y;
}

void check_conv(const ConvCase& cc, uint32_t seed, DType dtype = F32) {
  std::vector<int64_t> w_shape = {cc.m, cc.x_shape[1] / cc.group};
  w_shape.insert(w_shape.end(), cc.kernel.begin(), cc.kernel.end());
  const auto xv = pseudo_random(numel_of(cc.x_shape), seed);
  const auto wv = pseudo_random(numel_of(w_shape), seed + 1);
  const auto bv = pseudo_random(cc.m, seed + 2);
  std::vector<int64_t> want_shape;
  const auto want = naive_conv(cc, xv, wv, bv, &want_shape);
  auto y = run(
      "Conv", {make(dtype, cc.x_shape, xv), make(dtype, w_shape, wv), make(dtype, {cc.m}, bv)},
      {attr_ints("kernel_shape", cc.kernel), attr_ints("strides", cc.strides),
       attr_ints("dilations", cc.dilations), attr_ints("pads", cc.pads), attr_i("group", cc.group)},
      1, 11)[0];
  ASSERT_EQ(shape_of(y), want_shape);
  expect_close(values(y), want, dtype == F64 ? 1e-12 : 1e-5);
}

TEST(CpuNn, ConvMatchesDirectConvolution) {
  check_conv({{2, 3, 9}, 4, 1, {3}, {2}, {1}, {1, 2}}, 10);                    // 1-D, stride, pads
  check_conv({{2, 4, 7, 6}, 6, 2, {3, 2}, {1, 2}, {2, 1}, {1, 0, 2, 1}}, 20);  // groups, dilation
  check_conv({{1, 3, 5, 5}, 3, 3, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}}, 30);  // depthwise
  check_conv({{2, 2, 4, 5, 3}, 3, 1, {2, 3, 2}, {2, 1, 1}, {1, 1, 2}, {0, 1, 1, 1, 0, 0}},
             40);                                                              // 3-D
  check_conv({{3, 5, 4, 4}, 7, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}}, 50);  // pointwise
  check_conv({{2, 4, 6, 6}, 5, 1, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}}, 60, F64);
}

TEST(CpuNn, ConvBatchLargerThanOneIm2colChunk) {
  // 16 channels x 9 taps x 64*64 positions per image: the batch of 9 takes two chunks.
  check_conv({{9, 16, 64, 64}, 4, 1, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}}, 70);
}

TEST(CpuNn, ConvAutoPad) {
  // 5x5 input, kernel 3, stride 2: SAME gives ceil(5/2) = 3 outputs and total padding 2.
  const auto xv = pseudo_random(25, 80);
  const Tensor x = make(F32, {1, 1, 5, 5}, xv);
  const Tensor w = make(F32, {1, 1, 3, 3}, std::vector<double>(9, 1.0));
  auto box = [&](int r0, int c0) {  // sum of the 3x3 window starting at (r0, c0), zero outside
    double s = 0;
    for (int r = r0; r < r0 + 3; ++r)
      for (int c = c0; c < c0 + 3; ++c)
        if (r >= 0 && r < 5 && c >= 0 && c < 5) s += xv[r * 5 + c];
    return s;
  };
  auto upper = run("Conv", {x, w}, {attr_s("auto_pad", "SAME_UPPER"), attr_ints("strides", {2, 2})},
                   1, 11)[0];
  ASSERT_EQ(shape_of(upper), (std::vector<int64_t>{1, 1, 3, 3}));
  EXPECT_NEAR(values(upper)[0], box(-1, -1), 1e-5);
  EXPECT_NEAR(values(upper)[8], box(3, 3), 1e-5);
  auto valid =
      run("Conv", {x, w}, {attr_s("auto_pad", "VALID"), attr_ints("strides", {2, 2})}, 1, 11)[0];
  ASSERT_EQ(shape_of(valid), (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_NEAR(values(valid)[3], box(2, 2), 1e-5);
  // Odd total padding: SAME_LOWER puts the extra row/column first.
  auto lower = run("Conv", {x, make(F32, {1, 1, 2, 2}, {1, 1, 1, 1})},
                   {attr_s("auto_pad", "SAME_LOWER")}, 1, 11)[0];
  ASSERT_EQ(shape_of(lower), (std::vector<int64_t>{1, 1, 5, 5}));
  EXPECT_NEAR(values(lower)[0], xv[0], 1e-6);
  EXPECT_THAT(run_error("Conv", {x, w}, {attr_s("auto_pad", "SAME_MIDDLE")}, 1, 11),
              HasSubstr("attribute 'auto_pad' value 'SAME_MIDDLE' is not supported"));
  EXPECT_THAT(run_error("Conv",
                        {make(DType::kInt32, {1, 1, 2, 2}, {1, 2, 3, 4}),
                         make(DType::kInt32, {1, 1, 1, 1}, {1})},
                        {}, 1, 11),
              HasSubstr("element type i32 of input 0 is not supported"));
}

TEST(CpuNn, ConvHalfMatchesFloatRoundedOnce) {
  const auto xv = pseudo_random(2 * 3 * 6 * 6, 90), wv = pseudo_random(4 * 3 * 9, 91);
  // Quantise the inputs to fp16 first so both runs see the same operands.
  const Tensor xh = make(DType::kFloat16, {2, 3, 6, 6}, xv),
               wh = make(DType::kFloat16, {4, 3, 3, 3}, wv);
  auto yh = run("Conv", {xh, wh}, {attr_ints("pads", {1, 1, 1, 1})}, 1, 11)[0];
  auto yf = run("Conv", {make(F32, {2, 3, 6, 6}, values(xh)), make(F32, {4, 3, 3, 3}, values(wh))},
                {attr_ints("pads", {1, 1, 1, 1})}, 1, 11)[0];
  ASSERT_EQ(yh.dtype(), DType::kFloat16);
  const auto h = values(yh), f = values(yf);
  for (size_t i = 0; i < h.size(); ++i) {
    ASSERT_EQ(h[i], half_to_float(float_to_half(static_cast<float>(f[i])))) << i;
  }
}

// ConvTranspose by its definition: every input element scatters w * x into the output.
// With a bias, and in bf16 (the oracle on the bf16 operands; the result one rounding of the fp32
// sums, so within half a bf16 ulp of the exact value plus fp32's accumulation error).
void check_conv_transpose(const std::vector<int64_t>& x_shape, int64_t m_per_group, int64_t group,
                          const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                          const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads,
                          const std::vector<int64_t>& out_pad, uint32_t seed,
                          bool with_bias = false, DType dtype = F32) {
  SCOPED_TRACE("seed " + std::to_string(seed) + " in " + std::string(dtype_name(dtype)));
  const size_t ns = kernel.size();
  const int64_t n = x_shape[0], c = x_shape[1], m = m_per_group * group, cg = c / group;
  std::vector<int64_t> w_shape = {c, m_per_group};
  w_shape.insert(w_shape.end(), kernel.begin(), kernel.end());
  const Tensor x = make(dtype, x_shape, pseudo_random(numel_of(x_shape), seed)),
               w = make(dtype, w_shape, pseudo_random(numel_of(w_shape), seed + 1)),
               b = make(dtype, {m}, pseudo_random(m, seed + 2));
  const auto xv = values(x), wv = values(w), bv = values(b);
  // 1-D and 2-D only here: map to [h, w] with h = 1 for 1-D.
  const int64_t ih = ns == 2 ? x_shape[2] : 1, iw = x_shape.back();
  const int64_t kh = ns == 2 ? kernel[0] : 1, kw = kernel.back();
  const int64_t sh = ns == 2 ? strides[0] : 1, sw = strides.back();
  const int64_t dh = ns == 2 ? dilations[0] : 1, dw = dilations.back();
  const int64_t ph = ns == 2 ? pads[0] : 0, pw = pads[ns - 1];
  const int64_t oh =
      ns == 2 ? sh * (ih - 1) + out_pad[0] + (kh - 1) * dh + 1 - pads[0] - pads[2] : 1;
  const int64_t ow =
      sw * (iw - 1) + out_pad.back() + (kw - 1) * dw + 1 - pads[ns - 1] - pads[2 * ns - 1];
  std::vector<double> want(n * m * oh * ow, 0.0), magnitude(want.size(), 0.0);
  for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i)
    want[i] = with_bias ? bv[i / (oh * ow) % m] : 0.0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t y0 = 0; y0 < ih; ++y0)
        for (int64_t x0 = 0; x0 < iw; ++x0)
          for (int64_t mo = 0; mo < m_per_group; ++mo)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t e = 0; e < kw; ++e) {
                const int64_t r = y0 * sh - ph + a * dh, q = x0 * sw - pw + e * dw;
                if (r < 0 || r >= oh || q < 0 || q >= ow) continue;
                const int64_t mm = (ci / cg) * m_per_group + mo;
                const double term = xv[((b * c + ci) * ih + y0) * iw + x0] *
                                    wv[((ci * m_per_group + mo) * kh + a) * kw + e];
                want[((b * m + mm) * oh + r) * ow + q] += term;
                magnitude[((b * m + mm) * oh + r) * ow + q] += std::abs(term);
              }
  std::vector<Tensor> inputs = {x, w};
  if (with_bias) inputs.push_back(b);
  auto y =
      run("ConvTranspose", inputs,
          {attr_ints("strides", strides), attr_ints("dilations", dilations),
           attr_ints("pads", pads), attr_ints("output_padding", out_pad), attr_i("group", group)},
          1, 11)[0];
  std::vector<int64_t> want_shape = {n, m};
  if (ns == 2) want_shape.push_back(oh);
  want_shape.push_back(ow);
  ASSERT_EQ(shape_of(y), want_shape);
  ASSERT_EQ(y.dtype(), dtype);
  if (dtype == F32) return expect_close(values(y), want, 1e-5);
  const auto got = values(y);
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = std::ldexp(std::abs(want[i]), -8) + 1e-6 * (magnitude[i] + 1);
    ASSERT_LE(std::abs(got[i] - want[i]), bound) << "element " << i << ": want " << want[i];
  }
}

TEST(CpuNn, ConvTransposeMatchesScatterDefinition) {
  check_conv_transpose({2, 3, 5}, 2, 1, {3}, {2}, {1}, {1, 0}, {1}, 100);
  check_conv_transpose({1, 4, 3, 4}, 3, 2, {3, 2}, {2, 3}, {1, 2}, {1, 0, 0, 1}, {1, 0}, 110);
  check_conv_transpose({2, 2, 4, 4}, 1, 1, {2, 2}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 120);
}

// Every path of the CPU op, with a bias, in fp32 and bf16: oneDNN's backward-data pass (DCGAN's
// stride-2 upsampling, a grouped 1-D one with output padding), the GEMMs where the weights
// outweigh a 1x1 input map (DCGAN's first layer), and GEMM + col2im where oneDNN's padding
// cannot express the output (a dilation wider than the stride with output padding).
TEST(CpuNn, ConvTransposeWithBiasOnEveryPath) {
  for (DType t : {F32, DType::kBFloat16}) {
    check_conv_transpose({2, 6, 4, 4}, 5, 1, {4, 4}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0, 0}, 130,
                         true, t);
    check_conv_transpose({2, 4, 6}, 3, 2, {3}, {2}, {1}, {1, 0}, {1}, 140, true, t);
    check_conv_transpose({3, 8, 1, 1}, 5, 1, {4, 4}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 150,
                         true, t);
    check_conv_transpose({1, 3, 3, 4}, 2, 1, {2, 2}, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 160,
                         true, t);
  }
}

TEST(CpuNn, ConvTransposeOutputShapeAndAutoPad) {
  // ONNX's test_convtranspose_autopad_same: x 0..8 (3x3), w all ones [1, 2, 3, 3], stride 2.
  std::vector<double> xv(9);
  for (int i = 0; i < 9; ++i) xv[i] = i;
  const Tensor x = make(F32, {1, 1, 3, 3}, xv),
               w = make(F32, {1, 2, 3, 3}, std::vector<double>(18, 1));
  auto y = run("ConvTranspose", {x, w},
               {attr_s("auto_pad", "SAME_UPPER"), attr_ints("strides", {2, 2})}, 1, 11)[0];
  ASSERT_EQ(shape_of(y), (std::vector<int64_t>{1, 2, 6, 6}));
  const std::vector<double> row2 = {3, 3, 8, 5, 12, 7};
  const auto v = values(y);
  EXPECT_EQ(std::vector<double>(v.begin() + 12, v.begin() + 18), row2);
  // output_shape larger than the full output: the extra row and column are zero at the end.
  auto big = run("ConvTranspose", {x, w},
                 {attr_ints("strides", {3, 2}), attr_ints("output_shape", {10, 8})}, 1, 11)[0];
  ASSERT_EQ(shape_of(big), (std::vector<int64_t>{1, 2, 10, 8}));
  const auto bv = values(big);
  EXPECT_EQ(std::vector<double>(bv.begin(), bv.begin() + 8),
            (std::vector<double>{0, 0, 1, 1, 3, 2, 2, 0}));
  for (int q = 0; q < 8; ++q) EXPECT_EQ(bv[9 * 8 + q], 0.0);
}

// ---------------------------------------------------------------------------------------
// Pooling

TEST(CpuNn, MaxPoolWithPadsAndIndices) {
  // 1x1x3x4 input, kernel 2x2, stride 2, pads 1 (all sides): output 2x3.
  const std::vector<double> xv = {1, 9, 2, 3, 4, 5, 8, 7, 6, 0, 11, 10};
  auto out = run("MaxPool", {make(F32, {1, 1, 3, 4}, xv)},
                 {attr_ints("kernel_shape", {2, 2}), attr_ints("strides", {2, 2}),
                  attr_ints("pads", {1, 1, 1, 1})},
                 2, 12);
  ASSERT_EQ(shape_of(out[0]), (std::vector<int64_t>{1, 1, 2, 3}));
  EXPECT_EQ(values(out[0]), (std::vector<double>{1, 9, 3, 6, 11, 10}));
  EXPECT_EQ(out[1].dtype(), I64);
  EXPECT_EQ(values(out[1]), (std::vector<double>{0, 1, 3, 8, 10, 11}));
  // Column-major indices: h + w * H.
  auto cm = run("MaxPool", {make(F32, {1, 1, 3, 4}, xv)},
                {attr_ints("kernel_shape", {2, 2}), attr_ints("strides", {2, 2}),
                 attr_ints("pads", {1, 1, 1, 1}), attr_i("storage_order", 1)},
                2, 12);
  EXPECT_EQ(values(cm[1]), (std::vector<double>{0, 3, 9, 2, 8, 11}));
}

TEST(CpuNn, MaxPoolCeilModeDilationsAndBytes) {
  std::vector<double> xv(16);
  for (int i = 0; i < 16; ++i) xv[i] = i;
  auto y =
      run("MaxPool", {make(F32, {1, 1, 4, 4}, xv)},
          {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 2}), attr_i("ceil_mode", 1)},
          1, 12)[0];
  ASSERT_EQ(shape_of(y), (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(values(y), (std::vector<double>{10, 11, 14, 15}));
  auto d = run("MaxPool", {make(F32, {1, 1, 4, 4}, xv)},
               {attr_ints("kernel_shape", {2, 2}), attr_ints("dilations", {2, 2})}, 1, 12)[0];
  EXPECT_EQ(values(d), (std::vector<double>{10, 11, 14, 15}));
  auto u8 = run("MaxPool", {make(DType::kUInt8, {1, 1, 1, 4}, {1, 200, 3, 4})},
                {attr_ints("kernel_shape", {1, 2})}, 1, 12)[0];
  EXPECT_EQ(u8.dtype(), DType::kUInt8);
  EXPECT_EQ(values(u8), (std::vector<double>{200, 200, 4}));
}

TEST(CpuNn, AveragePoolCountIncludePad) {
  const Tensor x = make(F32, {1, 1, 2, 2}, {1, 2, 3, 4});
  const std::vector<plan::Attribute> attrs = {attr_ints("kernel_shape", {2, 2}),
                                              attr_ints("pads", {1, 1, 0, 0})};
  auto ex = run("AveragePool", {x}, attrs, 1, 11)[0];
  ASSERT_EQ(shape_of(ex), (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(values(ex), (std::vector<double>{1, 1.5, 2, 2.5}));
  auto attrs_in = attrs;
  attrs_in.push_back(attr_i("count_include_pad", 1));
  EXPECT_EQ(values(run("AveragePool", {x}, attrs_in, 1, 11)[0]),
            (std::vector<double>{0.25, 0.75, 1, 2.5}));
}

TEST(CpuNn, GlobalPoolsAndLpPool) {
  const Tensor x = make(F32, {1, 2, 2, 2}, {1, 2, 3, 4, -1, -5, 2, 0});
  auto avg = run("GlobalAveragePool", {x}, {}, 1, 1)[0];
  EXPECT_EQ(shape_of(avg), (std::vector<int64_t>{1, 2, 1, 1}));
  EXPECT_EQ(values(avg), (std::vector<double>{2.5, -1}));
  EXPECT_EQ(values(run("GlobalMaxPool", {x}, {}, 1, 1)[0]), (std::vector<double>{4, 2}));
  auto lp = run("LpPool", {make(F32, {1, 1, 1, 4}, {3, 4, 0, -5})},
                {attr_ints("kernel_shape", {1, 2}), attr_ints("strides", {1, 2})}, 1, 11)[0];
  expect_close(values(lp), {5, 5}, 1e-6);
  expect_close(
      values(run("GlobalLpPool", {make(F32, {1, 1, 2}, {3, 4})}, {attr_i("p", 1)}, 1, 2)[0]), {7},
      1e-6);
}

TEST(CpuNn, MaxUnpoolInvertsMaxPool) {
  const std::vector<double> xv = {1, 9, 2, 3, 4, 5, 8, 7, 6, 0, 11, 10, 12, 1, 1, 1};
  const std::vector<plan::Attribute> attrs = {attr_ints("kernel_shape", {2, 2}),
                                              attr_ints("strides", {2, 2})};
  auto pooled = run("MaxPool", {make(F32, {1, 1, 4, 4}, xv)}, attrs, 2, 12);
  auto y = run("MaxUnpool", {pooled[0], pooled[1]}, attrs, 1, 11)[0];
  ASSERT_EQ(shape_of(y), (std::vector<int64_t>{1, 1, 4, 4}));
  EXPECT_EQ(values(y), (std::vector<double>{0, 9, 0, 0, 0, 0, 8, 0, 0, 0, 11, 0, 12, 0, 0, 0}));
}

// ---------------------------------------------------------------------------------------
// Normalisation

TEST(CpuNn, BatchNormalizationInference) {
  const auto xv = pseudo_random(2 * 3 * 4, 200);
  const std::vector<double> s = {1, 2, 0.5}, b = {0, 1, -1}, mean = {0.1, -0.2, 0.3},
                            var = {1, 0.5, 2};
  auto y = run("BatchNormalization",
               {make(F32, {2, 3, 4}, xv), make(F32, {3}, s), make(F32, {3}, b),
                make(F32, {3}, mean), make(F32, {3}, var)},
               {attr_f("epsilon", 1e-3f)}, 1, 15)[0];
  std::vector<double> want(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = (i / 4) % 3;
    want[i] = s[c] * (xv[i] - mean[c]) / std::sqrt(var[c] + 1e-3) + b[c];
  }
  expect_close(values(y), want, 1e-5);
}

TEST(CpuNn, BatchNormalizationTrainingMode) {
  // Channel 0 holds {1, 3, 5, 7} (mean 4, biased variance 5); channel 1 holds {0, 0, 2, 2}.
  const Tensor x = make(F32, {2, 2, 2}, {1, 3, 0, 0, 5, 7, 2, 2});
  auto out =
      run("BatchNormalization",
          {x, make(F32, {2}, {1, 1}), make(F32, {2}, {0, 0}), make(F32, {2}, {10, 20}),
           make(F32, {2}, {3, 4})},
          {attr_i("training_mode", 1), attr_f("momentum", 0.9f), attr_f("epsilon", 0.0f)}, 3, 15);
  const double sd0 = std::sqrt(5.0);
  expect_close(values(out[0]), {-3 / sd0, -1 / sd0, -1, -1, 1 / sd0, 3 / sd0, 1, 1}, 1e-6);
  expect_close(values(out[1]), {10 * 0.9 + 4 * 0.1, 20 * 0.9 + 1 * 0.1}, 1e-6);
  expect_close(values(out[2]), {3 * 0.9 + 5 * 0.1, 4 * 0.9 + 1 * 0.1}, 1e-6);
}

TEST(CpuNn, BatchNormalizationHalfDataFloatStatistics) {
  // Opset 15 allows fp16 X with fp32 scale/bias/mean/var: Y is fp16, running stats stay fp32.
  const Tensor x = make(DType::kFloat16, {2, 1, 2}, {1, 2, 3, 4});
  const Tensor one = make(F32, {1}, {1}), zero = make(F32, {1}, {0});
  auto out =
      run("BatchNormalization", {x, one, zero, zero, one}, {attr_i("training_mode", 1)}, 3, 15);
  EXPECT_EQ(out[0].dtype(), DType::kFloat16);
  EXPECT_EQ(out[1].dtype(), F32);
  EXPECT_EQ(out[2].dtype(), F32);
  const double inv = 1.0 / std::sqrt(1.25 + 1e-5);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(values(out[0])[i], (i + 1 - 2.5) * inv, 1e-3);
  expect_close(values(out[1]), {0.25}, 1e-6);
}

std::vector<double> layer_norm_ref(const std::vector<double>& x, int64_t rows, int64_t cols,
                                   const std::vector<double>& s, const std::vector<double>& b,
                                   double eps, std::vector<double>* mean,
                                   std::vector<double>* inv) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < cols; ++j) m += x[r * cols + j] / cols;
    for (int64_t j = 0; j < cols; ++j) v += (x[r * cols + j] - m) * (x[r * cols + j] - m) / cols;
    const double is = 1 / std::sqrt(v + eps);
    mean->push_back(m);
    inv->push_back(is);
    for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = (x[r * cols + j] - m) * is * s[j] + b[j];
  }
  return y;
}

TEST(CpuNn, LayerNormalizationLastAxisAndStatistics) {
  const auto xv = pseudo_random(2 * 3 * 5, 300), sv = pseudo_random(5, 301),
             bv = pseudo_random(5, 302);
  auto out =
      run("LayerNormalization", {make(F32, {2, 3, 5}, xv), make(F32, {5}, sv), make(F32, {5}, bv)},
          {attr_f("epsilon", 1e-5f)}, 3, 17);
  std::vector<double> mean, inv;
  expect_close(values(out[0]), layer_norm_ref(xv, 6, 5, sv, bv, 1e-5, &mean, &inv), 1e-5);
  EXPECT_EQ(shape_of(out[1]), (std::vector<int64_t>{2, 3, 1}));
  EXPECT_EQ(out[1].dtype(), F32);
  expect_close(values(out[1]), mean, 1e-6);
  expect_close(values(out[2]), inv, 1e-5);
}

TEST(CpuNn, LayerNormalizationAxisOneWithoutBias) {
  const auto xv = pseudo_random(2 * 3 * 4, 310), sv = pseudo_random(12, 311);
  auto out = run("LayerNormalization", {make(F32, {2, 3, 4}, xv), make(F32, {3, 4}, sv)},
                 {attr_i("axis", 1)}, 1, 17);
  std::vector<double> mean, inv;
  expect_close(values(out[0]),
               layer_norm_ref(xv, 2, 12, sv, std::vector<double>(12, 0.0), 1e-5, &mean, &inv),
               1e-5);
}

TEST(CpuNn, LayerNormalizationHalfKeepsFloatStatistics) {
  const auto xv = pseudo_random(2 * 8, 320);
  const Tensor xh = make(DType::kFloat16, {2, 8}, xv);
  auto out = run("LayerNormalization",
                 {xh, make(DType::kFloat16, {8}, std::vector<double>(8, 1.0))}, {}, 3, 17);
  EXPECT_EQ(out[0].dtype(), DType::kFloat16);
  EXPECT_EQ(out[1].dtype(), F32);
  std::vector<double> mean, inv;
  const auto want = layer_norm_ref(values(xh), 2, 8, std::vector<double>(8, 1.0),
                                   std::vector<double>(8, 0.0), 1e-5, &mean, &inv);
  const auto got = values(out[0]);
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 2e-3 * (1 + std::abs(want[i])));
}

TEST(CpuNn, InstanceNormalizationLrnAndMvn) {
  const auto xv = pseudo_random(2 * 3 * 4, 400);
  const std::vector<double> s = {1, 2, 3}, b = {0, -1, 1};
  auto in = run("InstanceNormalization",
                {make(F32, {2, 3, 4}, xv), make(F32, {3}, s), make(F32, {3}, b)}, {}, 1, 6)[0];
  std::vector<double> mean, inv, want;
  for (int p = 0; p < 6; ++p) {
    std::vector<double> plane(xv.begin() + p * 4, xv.begin() + p * 4 + 4);
    const auto y = layer_norm_ref(plane, 1, 4, std::vector<double>(4, s[p % 3]),
                                  std::vector<double>(4, b[p % 3]), 1e-5, &mean, &inv);
    want.insert(want.end(), y.begin(), y.end());
  }
  expect_close(values(in), want, 1e-5);

  // LRN, size 3 over 3 channels at one position: channel c sees c-1..c+1.
  auto lrn =
      run("LRN", {make(F32, {1, 3, 1, 1}, {1, 2, 3})},
          {attr_i("size", 3), attr_f("alpha", 0.3f), attr_f("beta", 0.5f), attr_f("bias", 2.0f)}, 1,
          13)[0];
  expect_close(
      values(lrn),
      {1 / std::sqrt(2 + 0.1 * 5), 2 / std::sqrt(2 + 0.1 * 14), 3 / std::sqrt(2 + 0.1 * 13)}, 1e-6);

  // MVN over axes [0, 2, 3] of [2, 2, 1, 2]: per channel.
  const std::vector<double> mv = {1, 3, 10, 10, 5, 7, 10, 14};
  auto mvn = run("MeanVarianceNormalization", {make(F32, {2, 2, 1, 2}, mv)}, {}, 1, 13)[0];
  const double sd0 = std::sqrt(5.0), sd1 = std::sqrt(3.0);
  expect_close(values(mvn),
               {-3 / sd0, -1 / sd0, -1 / sd1, -1 / sd1, 1 / sd0, 3 / sd0, -1 / sd1, 3 / sd1}, 1e-6);

  // A large mean against a small spread: 4096 + {-1, 1, -1, 1} (exact in float32). The
  // variance taken as E[x^2] - E[x]^2 cancels to rounding noise of 4096^2 (float32's ulp
  // there is 2); the mean of squared deviations gives exactly 1.
  auto offset = run("MeanVarianceNormalization",
                    {make(F32, {1, 1, 1, 4}, {4095, 4097, 4095, 4097})}, {}, 1, 13)[0];
  expect_close(values(offset), {-1, 1, -1, 1}, 1e-6);
}

}  // namespace
}  // namespace ampc::rt::cpu
