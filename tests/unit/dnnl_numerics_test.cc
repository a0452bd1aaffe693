// GEMM and convolution through oneDNN (kernels/cpu/dnnl_*): the CPU operators MatMul, Gemm,
// Conv and ampc.ConvGrad in bf16 and fp32 against an oracle in double over the same
// (bf16-rounded) inputs.
//
// The bound: every output is a sum of K products of representable inputs. Products of bf16
// (and fp32) values are exact in double; fp32 accumulation in any order stays within
// gamma_K * sum |products| of the exact sum, gamma_K = K u / (1 - K u), u = 2^-24 (Higham,
// Accuracy and Stability, 3.1). A bf16 result is that fp32 sum rounded once: it lies between
// the bf16 roundings of exact - bound and exact + bound, so for most elements it equals the
// exact sum rounded once, and anything rounded twice (to bf16 before the end) or computed
// from other inputs falls outside. fp32 results lie within the bound itself.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "base/half.h"
#include "kernels/cpu/conv_gemm.h"
#include "kernels/cpu/depthwise_grad.h"
#include "kernels/cpu/dnnl_conv.h"
#include "kernels/cpu/dnnl_matmul.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::rt::cpu {
namespace {

using optest::attr_f;
using optest::attr_i;
using optest::attr_ints;

// A reference value: the exact sum, the sum of |terms| and the number of terms.
struct Exact {
  double sum = 0, abs_sum = 0;
  int64_t terms = 0;
  void add(double a, double b) {
    sum += a * b;
    abs_sum += std::fabs(a * b);
    ++terms;
  }
};

double round_bf16(double v) {
  return bf16_to_float(float_to_bf16(static_cast<float>(v)));
}

// Random values in [-2, 2) representable in `dtype` (bf16 or fp32).
std::vector<double> inputs(DType dtype, size_t n, uint32_t seed) {
  std::vector<double> v = optest::pseudo_random(n, seed);
  for (double& x : v) {
    x *= 2;
    x = dtype == DType::kBFloat16 ? round_bf16(x) : static_cast<float>(x);
  }
  return v;
}

// Checks `got` (the op's output, as doubles) against the oracle, element by element.
void expect_within(DType dtype, const std::vector<double>& got, const std::vector<Exact>& want) {
  ASSERT_EQ(got.size(), want.size());
  int64_t exact_hits = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const Exact& e = want[i];
    const double u = std::ldexp(1.0, -24);
    const double k = static_cast<double>(std::max<int64_t>(e.terms, 1));
    const double bound = k * u / (1 - k * u) * e.abs_sum;
    if (dtype == DType::kBFloat16) {
      const double lo = round_bf16(e.sum - bound), hi = round_bf16(e.sum + bound);
      ASSERT_TRUE(got[i] >= lo && got[i] <= hi) << "element " << i << ": " << got[i] << " outside ["
                                                << lo << ", " << hi << "], exact " << e.sum;
      exact_hits += got[i] == round_bf16(e.sum);
    } else {
      ASSERT_LE(std::fabs(got[i] - e.sum), bound)
          << "element " << i << ": " << got[i] << ", exact " << e.sum;
    }
  }
  // Differences in fp32 order flip a bf16 rounding only near a midpoint: rare.
  if (dtype == DType::kBFloat16) {
    EXPECT_GE(exact_hits, static_cast<int64_t>(got.size() * 95 / 100));
  }
}

class DnnlNumerics : public ::testing::TestWithParam<DType> {};

TEST_P(DnnlNumerics, BatchedMatMulWithBroadcast) {
  const DType t = GetParam();
  // A [2, 3, m, k] x B [3, k, n]: B broadcast along the first batch dimension.
  const int64_t m = 17, k = 300, n = 33;
  const auto a = inputs(t, 2 * 3 * m * k, 1), b = inputs(t, 3 * k * n, 2);
  const auto y = optest::run(
      "MatMul", {optest::make(t, {2, 3, m, k}, a), optest::make(t, {3, k, n}, b)}, {}, 1, 13)[0];
  ASSERT_EQ(y.dtype(), t);
  std::vector<Exact> want(2 * 3 * m * n);
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t q = 0; q < 3; ++q)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t r = 0; r < k; ++r)
            want[((p * 3 + q) * m + i) * n + j].add(a[((p * 3 + q) * m + i) * k + r],
                                                    b[(q * k + r) * n + j]);
  expect_within(t, optest::values(y), want);
}

// alpha = beta = 1 with a row C is the bias path (C added to the accumulator by oneDNN); other
// scalings and a C of [1, N] take the others.
TEST_P(DnnlNumerics, GemmWithTransposesAlphaBetaAndC) {
  const DType t = GetParam();
  const int64_t m = 40, k = 257, n = 24;
  const auto a = inputs(t, k * m, 3), b = inputs(t, n * k, 4), c = inputs(t, n, 5);
  struct Scaling {
    float alpha, beta;  // powers of two: exact scalings
    std::vector<int64_t> c_shape;
  };
  for (const Scaling& s : {Scaling{0.5f, 2.0f, {n}}, Scaling{1.0f, 1.0f, {n}},
                           Scaling{1.0f, 1.0f, {1, n}}, Scaling{1.0f, 2.0f, {1, n}}}) {
    SCOPED_TRACE(std::to_string(s.alpha) + " " + std::to_string(s.beta) + " C rank " +
                 std::to_string(s.c_shape.size()));
    const auto y = optest::run(
        "Gemm",
        {optest::make(t, {k, m}, a), optest::make(t, {n, k}, b), optest::make(t, s.c_shape, c)},
        {attr_i("transA", 1), attr_i("transB", 1), attr_f("alpha", s.alpha),
         attr_f("beta", s.beta)},
        1, 13)[0];
    std::vector<Exact> want(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        Exact& e = want[i * n + j];
        for (int64_t r = 0; r < k; ++r) e.add(s.alpha * a[r * m + i], b[j * k + r]);
        e.add(s.beta * c[j], 1.0);
      }
    expect_within(t, optest::values(y), want);
  }
}

// A grouped, strided, dilated, padded 2-D convolution: x [n, c, h, w], w [m, c/g, kh, kw].
struct ConvCase {
  int64_t n = 2, c = 8, h = 11, w = 9, m = 12, g = 2, kh = 3, kw = 2;
  int64_t sh = 2, sw = 1, dh = 2, dw = 1, ph = 2, pw = 1, ph_end = 1, pw_end = 0;
  int64_t oh() const { return (h + ph + ph_end - (dh * (kh - 1) + 1)) / sh + 1; }
  int64_t ow() const { return (w + pw + pw_end - (dw * (kw - 1) + 1)) / sw + 1; }
  std::vector<plan::Attribute> attrs() const {
    return {attr_i("group", g), attr_ints("strides", {sh, sw}), attr_ints("dilations", {dh, dw}),
            attr_ints("pads", {ph, pw, ph_end, pw_end}), attr_ints("kernel_shape", {kh, kw})};
  }
  // Calls f(x index, w index, y index) for every tap that reads the input (not padding).
  template <typename F>
  void taps(F f) const {
    const int64_t cg = c / g, mg = m / g;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t o = 0; o < m; ++o)
        for (int64_t yi = 0; yi < oh(); ++yi)
          for (int64_t xi = 0; xi < ow(); ++xi)
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t ki = 0; ki < kh; ++ki)
                for (int64_t kj = 0; kj < kw; ++kj) {
                  const int64_t ii = yi * sh - ph + ki * dh, jj = xi * sw - pw + kj * dw;
                  if (ii < 0 || ii >= h || jj < 0 || jj >= w) continue;
                  const int64_t cin = (o / mg) * cg + ci;
                  f(((b * c + cin) * h + ii) * w + jj, ((o * cg + ci) * kh + ki) * kw + kj,
                    ((b * m + o) * oh() + yi) * ow() + xi);
                }
  }
};

// The kernels' geometry of case cc: a 2-D problem uses the last two of the three slots.
kernels::cpu::ConvGeom geometry(const ConvCase& cc) {
  kernels::cpu::ConvGeom g;
  const int64_t sizes[][7] = {{cc.h, cc.oh(), cc.kh, cc.sh, cc.dh, cc.ph, cc.ph_end},
                              {cc.w, cc.ow(), cc.kw, cc.sw, cc.dw, cc.pw, cc.pw_end}};
  for (int d = 0; d < 2; ++d) {
    int64_t* fields[] = {g.image, g.cols, g.kernel, g.stride, g.dilation, g.pad, g.pad_end};
    for (int f = 0; f < 7; ++f) fields[f][d + 1] = sizes[d][f];
  }
  return g;
}

// A case with square maps and windows: n images of c channels, m outputs in `group` groups,
// hw x hw maps, a k x k window (no dilation), stride and padding on every side.
ConvCase square(int64_t n, int64_t c, int64_t m, int64_t group, int64_t h, int64_t w, int64_t k,
                int64_t stride, int64_t pad) {
  ConvCase cc;
  cc.n = n;
  cc.c = c;
  cc.m = m;
  cc.g = group;
  cc.h = h;
  cc.w = w;
  cc.kh = cc.kw = k;
  cc.sh = cc.sw = stride;
  cc.dh = cc.dw = 1;
  cc.ph = cc.pw = cc.ph_end = cc.pw_end = pad;
  return cc;
}

// Conv on case cc (with a bias) against the oracle.
void check_conv_forward(DType t, const ConvCase& cc) {
  const auto x = inputs(t, cc.n * cc.c * cc.h * cc.w, 6);
  const auto w = inputs(t, cc.m * (cc.c / cc.g) * cc.kh * cc.kw, 7);
  const auto bias = inputs(t, cc.m, 8);
  const auto y = optest::run(
      "Conv",
      {optest::make(t, {cc.n, cc.c, cc.h, cc.w}, x),
       optest::make(t, {cc.m, cc.c / cc.g, cc.kh, cc.kw}, w), optest::make(t, {cc.m}, bias)},
      cc.attrs(), 1, 11)[0];
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{cc.n, cc.m, cc.oh(), cc.ow()}));
  std::vector<Exact> want(cc.n * cc.m * cc.oh() * cc.ow());
  for (size_t i = 0; i < want.size(); ++i) {
    want[i].add(bias[(i / (cc.oh() * cc.ow())) % cc.m], 1.0);
  }
  cc.taps([&](int64_t xi, int64_t wi, int64_t yi) { want[yi].add(x[xi], w[wi]); });
  expect_within(t, optest::values(y), want);
}

TEST_P(DnnlNumerics, ConvForward) {
  check_conv_forward(GetParam(), ConvCase{});
}

// The three gradients of ConvGrad on case cc against the oracle.
void check_conv_grad(DType t, const ConvCase& cc) {
  const auto x = inputs(t, cc.n * cc.c * cc.h * cc.w, 9);
  const auto w = inputs(t, cc.m * (cc.c / cc.g) * cc.kh * cc.kw, 10);
  const auto dy = inputs(t, cc.n * cc.m * cc.oh() * cc.ow(), 11);
  const auto out = optest::run("ConvGrad",
                               {optest::make(t, {cc.n, cc.m, cc.oh(), cc.ow()}, dy),
                                optest::make(t, {cc.n, cc.c, cc.h, cc.w}, x),
                                optest::make(t, {cc.m, cc.c / cc.g, cc.kh, cc.kw}, w)},
                               cc.attrs(), 3, 1, "ampc");
  std::vector<Exact> dx(x.size()), dw(w.size()), db(cc.m);
  cc.taps([&](int64_t xi, int64_t wi, int64_t yi) {
    dx[xi].add(dy[yi], w[wi]);
    dw[wi].add(dy[yi], x[xi]);
  });
  for (size_t i = 0; i < dy.size(); ++i) db[(i / (cc.oh() * cc.ow())) % cc.m].add(dy[i], 1.0);
  {
    SCOPED_TRACE("dX");
    expect_within(t, optest::values(out[0]), dx);
  }
  {
    SCOPED_TRACE("dW");
    expect_within(t, optest::values(out[1]), dw);
  }
  {
    SCOPED_TRACE("dB");
    expect_within(t, optest::values(out[2]), db);
  }
}

TEST_P(DnnlNumerics, ConvGradDataWeightsAndBias) {
  check_conv_grad(GetParam(), ConvCase{});
}

// Convolutions whose weights outweigh their activations run as GEMMs over the active taps
// (kernels/cpu/conv_gemm.h). One case per shape: ResNet's last stage on 32x32 images (1x1
// maps under a padded 3x3 window: the centre tap alone reads the image), a 2x2 map (every tap
// active, transposes between the GEMM's rows and NCHW), a stride-2 reduction of 2x2 to 1x1 (four
// taps), a stride-2 reduction of 4x4 to 2x2 (several outputs a row, gathered with the stride), a
// 1x3 map (one kernel row active), a 2x2 map of a single image (its gradient dy is already the
// weight gradient's [m, positions] operand) and the strided, dilated, unevenly padded default
// case with enough output channels.
TEST_P(DnnlNumerics, ConvAsGemmWhereWeightsOutweighActivations) {
  auto small = [](int64_t n, int64_t c, int64_t m, int64_t h, int64_t w, int64_t stride) {
    return square(n, c, m, 1, h, w, 3, stride, 1);
  };
  ConvCase wide;
  wide.g = 1;
  wide.m = 96;
  for (const ConvCase& cc :
       {small(3, 16, 32, 1, 1, 1), small(2, 8, 16, 2, 2, 1), small(4, 8, 16, 2, 2, 2),
        small(2, 8, 16, 4, 4, 2), small(2, 8, 16, 1, 3, 1), small(1, 8, 16, 2, 2, 1), wide}) {
    SCOPED_TRACE("map " + std::to_string(cc.h) + "x" + std::to_string(cc.w) + ", stride " +
                 std::to_string(cc.sh) + ", " + std::to_string(cc.m) + " outputs");
    ASSERT_TRUE(kernels::cpu::conv_gemm_serves({geometry(cc), cc.n, cc.c, cc.m, GetParam()}, 1));
    check_conv_forward(GetParam(), cc);
    check_conv_grad(GetParam(), cc);
  }
}

// bf16 weight gradients whose GEMM is wide (channels x active taps >= 512) take the GEMM
// formulation although the activations outweigh the weights, as ResNet's first and second
// stages at 32x32 do, with the rows gathered tap-major; their input gradients stay with oneDNN.
// fp32 keeps oneDNN for both. One case per shape: every tap active, a stride-2 reduction of
// 8x8 to 4x4, 1x8 maps whose window's first and last kernel rows read only padding, 72
// channels on 5x5 maps (the image's transpose to pixels x channels ends in partial tiles), and a
// 1x1 window of 24 channels on 6x6 maps (a single tap: narrow, but no gather).
TEST_P(DnnlNumerics, Bf16WeightGradAsGemmWhereItsGemmIsWide) {
  for (const ConvCase& wide :
       {square(2, 64, 16, 1, 4, 4, 3, 1, 1), square(2, 64, 16, 1, 8, 8, 3, 2, 1),
        square(4, 192, 16, 1, 1, 8, 3, 1, 1), square(2, 72, 16, 1, 5, 5, 3, 1, 1),
        square(2, 24, 16, 1, 6, 6, 1, 1, 0)}) {
    SCOPED_TRACE("map " + std::to_string(wide.h) + "x" + std::to_string(wide.w) + ", stride " +
                 std::to_string(wide.sh));
    const kernels::cpu::ConvGemm p{geometry(wide), wide.n, wide.c, wide.m, GetParam()};
    EXPECT_FALSE(kernels::cpu::conv_gemm_serves(p, 1));
    EXPECT_EQ(kernels::cpu::conv_gemm_serves_weight_grad(p, 1),
              GetParam() == DType::kBFloat16 && kernels::cpu::dnnl_bf16_native());
    check_conv_grad(GetParam(), wide);
  }
  ConvCase cc = square(2, 64, 16, 1, 4, 4, 3, 1, 1);
  cc.c = 8;  // 72 columns: a narrow GEMM stays with oneDNN
  EXPECT_FALSE(
      kernels::cpu::conv_gemm_serves_weight_grad({geometry(cc), cc.n, cc.c, cc.m, GetParam()}, 1));
}

// With 128 output channels or more, the bf16 weight gradient takes the GEMM however many rows
// the batch has: the images in chunks whose rows fit kWeightGradMaxGathered, the chunks'
// products summed in fp32 and rounded once (the oracle's bound is the whole sum's). The case:
// 768 channels on 1x512 maps under a padded 3x3 window (the first and last kernel rows read
// only padding), chunks of three images and one.
TEST_P(DnnlNumerics, Bf16WeightGradInChunksWithManyOutputChannels) {
  const ConvCase widest = square(4, 768, 128, 1, 1, 512, 3, 1, 1);
  const kernels::cpu::ConvGemm p{geometry(widest), widest.n, widest.c, widest.m, GetParam()};
  ASSERT_GT(widest.n * widest.oh() * widest.ow() * widest.c * 3,
            kernels::cpu::kWeightGradMaxGathered);
  EXPECT_EQ(kernels::cpu::conv_gemm_serves_weight_grad(p, 1),
            GetParam() == DType::kBFloat16 && kernels::cpu::dnnl_bf16_native());
  check_conv_grad(GetParam(), widest);
}

// Which bf16 weight gradients take the GEMM past kWeightGradMaxGathered rows (the rule alone;
// the numerics are the case above's): 128 output channels of a narrow 1x1 convolution, and of
// a 3x3 one whose single image's rows exceed the bound but whose GEMM is wider than
// kWeightGradChunkedMinWidth, do, and so does a 1x1 convolution to 64 (a single tap: no
// gather); 64 output channels under a 3x3 window (the GEMM at half its peak) do not, however
// wide; nor do 128 whose single image's rows exceed the bound on a narrower GEMM.
TEST(DnnlWeightGradRule, ManyRowsTakeTheGemmWith128OutputsOrOneTap) {
  if (!kernels::cpu::dnnl_bf16_native()) GTEST_SKIP() << "no native bf16 on this CPU";
  auto serves = [](int64_t c, int64_t m, int64_t hw, int64_t k) {
    const ConvCase cc = square(32, c, m, 1, hw, hw, k, 1, k / 2);
    return kernels::cpu::conv_gemm_serves_weight_grad(
        {geometry(cc), cc.n, cc.c, cc.m, DType::kBFloat16}, 1);
  };
  EXPECT_TRUE(serves(32, 128, 28, 1));
  EXPECT_TRUE(serves(256, 256, 56, 3));
  EXPECT_TRUE(serves(256, 64, 28, 1));
  EXPECT_FALSE(serves(64, 64, 56, 3));
  EXPECT_FALSE(serves(256, 64, 28, 3));
  EXPECT_FALSE(serves(128, 128, 64, 3));
}

// Depthwise convolutions (group == channels) on maps no larger than the window, as at the end
// of MobileNet on small images: oneDNN's depthwise kernel refuses some of these, and their
// weight gradients are then direct sums (kernels/cpu/depthwise_grad.h). One case per shape:
// 2x2 and 1x1 maps under a padded 3x3 window, a stride-2 reduction to 1x1, a channel
// multiplier of 2, and a map large enough for oneDNN's own depthwise kernel.
TEST_P(DnnlNumerics, DepthwiseConvGradOnSmallMaps) {
  auto depthwise = [](int64_t hw, int64_t stride, int64_t multiplier) {
    return square(3, 32, 32 * multiplier, 32, hw, hw, 3, stride, 1);
  };
  for (const ConvCase& cc : {depthwise(2, 1, 1), depthwise(1, 1, 1), depthwise(2, 2, 1),
                             depthwise(2, 1, 2), depthwise(12, 1, 1)}) {
    SCOPED_TRACE("map " + std::to_string(cc.h) + ", stride " + std::to_string(cc.sh) +
                 ", multiplier " + std::to_string(cc.m / cc.c));
    check_conv_grad(GetParam(), cc);
  }
}

// Strided convolutions whose windows leave the image's last rows unread: ResNet's 1x1
// stride-2 downsampling of an even size (8 -> 4), and a 3x3 stride-3 window over 8 (the last
// window ends a row before the image does). Their end padding is negative as the geometry
// states it; oneDNN takes them with none (its output size rounds down), so they run on its
// convolution kernels instead of the im2col fallback. A pad that really cuts the image stays
// refused.
TEST_P(DnnlNumerics, StridedConvLeavingLastRowsUnreadRunsOnOneDnn) {
  const DType t = GetParam();
  auto strided = [](int64_t k, int64_t stride, int64_t pad) {
    return square(3, 16, 24, 1, 8, 8, k, stride, pad);
  };
  auto problem = [&](const ConvCase& cc) {
    kernels::cpu::DnnlConv p;
    p.x_type = p.w_type = p.y_type = t;
    p.n = cc.n;
    p.c = cc.c;
    p.m = cc.m;
    const int64_t image[] = {cc.h, cc.w}, cols[] = {cc.oh(), cc.ow()}, kernel[] = {cc.kh, cc.kw},
                  stride[] = {cc.sh, cc.sw}, pad[] = {cc.ph, cc.pw};
    for (int d = 0; d < 2; ++d) {
      p.image[d] = image[d];
      p.cols[d] = cols[d];
      p.kernel[d] = kernel[d];
      p.stride[d] = stride[d];
      p.pad[d] = pad[d];
    }
    return p;
  };
  for (const ConvCase& cc : {strided(1, 2, 0), strided(3, 3, 1)}) {
    SCOPED_TRACE("kernel " + std::to_string(cc.kh) + ", stride " + std::to_string(cc.sh));
    ASSERT_FALSE(kernels::cpu::conv_gemm_serves({geometry(cc), cc.n, cc.c, cc.m, t}, 1));
    const kernels::cpu::DnnlConv p = problem(cc);
    std::vector<float> x(cc.n * cc.c * cc.h * cc.w), w(cc.m * cc.c * cc.kh * cc.kw),
        y(cc.n * cc.m * cc.oh() * cc.ow());  // room for either element type
    // The operators call oneDNN in bf16 only on a CPU with bf16 arithmetic.
    if (t == DType::kFloat32 || kernels::cpu::dnnl_bf16_native()) {
      EXPECT_TRUE(kernels::cpu::dnnl_conv_forward(p, x.data(), w.data(), nullptr, y.data()));
      EXPECT_TRUE(kernels::cpu::dnnl_conv_backward_data(p, y.data(), w.data(), x.data()));
      EXPECT_TRUE(
          kernels::cpu::dnnl_conv_backward_weights(p, y.data(), x.data(), w.data(), nullptr));
    }
    check_conv_forward(t, cc);
    check_conv_grad(t, cc);
  }
  ConvCase cut = strided(3, 1, 1);
  cut.ph_end = cut.pw_end = -1;  // the last input row and column are cut off
  kernels::cpu::DnnlConv p = problem(cut);
  std::vector<float> x(cut.n * cut.c * cut.h * cut.w), w(cut.m * cut.c * 9),
      y(cut.n * cut.m * cut.oh() * cut.ow());
  EXPECT_FALSE(kernels::cpu::dnnl_conv_forward(p, x.data(), w.data(), nullptr, y.data()));
  check_conv_forward(t, cut);
}

void depthwise_direct_sums(DType t, const ConvCase& cc);

// The direct sums themselves on a geometry with every feature (stride, dilation, uneven
// padding, a multiplier of 2), whatever oneDNN would choose for it; with rows of unit stride
// (the AVX-512 loops where the CPU has them: rows of 9 and of 35 outputs, over two vectors and
// a tail), of stride 2 along them (the portable loop), and rows of 3 outputs with one output
// channel per input channel, 20 of them (sixteen channels side by side, then four).
TEST_P(DnnlNumerics, DepthwiseWeightGradDirectSums) {
  struct Shape {
    int64_t width, row_stride, channels, multiplier;
  };
  for (const Shape& s :
       {Shape{9, 1, 4, 2}, Shape{37, 1, 4, 2}, Shape{15, 2, 4, 2}, Shape{3, 1, 20, 1}}) {
    ConvCase cc;
    cc.c = cc.g = s.channels;
    cc.m = s.channels * s.multiplier;
    cc.w = s.width;
    cc.sw = s.row_stride;
    SCOPED_TRACE("width " + std::to_string(s.width) + ", stride " + std::to_string(s.row_stride) +
                 ", channels " + std::to_string(cc.c) + ", outputs " + std::to_string(cc.m));
    depthwise_direct_sums(GetParam(), cc);
  }
}

void depthwise_direct_sums(DType t, const ConvCase& cc) {
  const auto x = inputs(t, cc.n * cc.c * cc.h * cc.w, 12);
  const auto dy = inputs(t, cc.n * cc.m * cc.oh() * cc.ow(), 13);
  const kernels::cpu::ConvGeom g = geometry(cc);
  std::vector<Exact> dw(cc.m * cc.kh * cc.kw), db(cc.m);
  cc.taps([&](int64_t xi, int64_t wi, int64_t yi) { dw[wi].add(dy[yi], x[xi]); });
  for (size_t i = 0; i < dy.size(); ++i) db[(i / (cc.oh() * cc.ow())) % cc.m].add(dy[i], 1.0);
  std::vector<double> got_w(dw.size()), got_b(db.size());
  auto run = [&](auto tag, auto to, auto from) {
    using T = decltype(tag);
    std::vector<T> xt, dyt, dwt(dw.size()), dbt(db.size());
    for (double v : x) xt.push_back(to(v));
    for (double v : dy) dyt.push_back(to(v));
    kernels::cpu::depthwise_weight_grad(g, dyt.data(), xt.data(), dwt.data(), dbt.data(), cc.n,
                                        cc.c, cc.m);
    for (size_t i = 0; i < dwt.size(); ++i) got_w[i] = from(dwt[i]);
    for (size_t i = 0; i < dbt.size(); ++i) got_b[i] = from(dbt[i]);
  };
  if (t == DType::kBFloat16) {
    run(
        BFloat16{}, [](double v) { return float_to_bf16(static_cast<float>(v)); },
        [](BFloat16 v) { return double(bf16_to_float(v)); });
  } else {
    run(
        0.0f, [](double v) { return static_cast<float>(v); }, [](float v) { return double(v); });
  }
  {
    SCOPED_TRACE("dW");
    expect_within(t, got_w, dw);
  }
  {
    SCOPED_TRACE("dB");
    expect_within(t, got_b, db);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, DnnlNumerics, ::testing::Values(DType::kFloat32, DType::kBFloat16),
                         [](const auto& info) {
                           return std::string(info.param == DType::kFloat32 ? "fp32" : "bf16");
                         });

// A strided product whose size-1 axes have strides that look transposed: C [2, 4, 1, 6] written
// with strides 24, 6, 1, 1 (a Resize's interpolation MatMul of a 1x1 map, its output's
// Transpose folded into the view). oneDNN 2.6 read it as a transposed layout, picked gemm:jit
// and failed to execute; with the size-1 strides made canonical it runs, and every element is
// the product (k = 1: exact) of A [2, 4, 1, 1] and the broadcast B [1, 1, 1, 6].
TEST(DnnlStridedMatmul, SizeOneAxesWithTransposedLookingStrides) {
  kernels::cpu::DnnlStridedMatmul p;
  p.a = {{2, 4, 1, 1}, {4, 1, 1, 1}};
  p.b = {{1, 1, 1, 6}, {6, 6, 6, 1}};
  p.c = {{2, 4, 1, 6}, {24, 6, 1, 1}};
  std::vector<float> a(8), b(6), c(48, -1.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) - 3.5f;
  for (size_t j = 0; j < b.size(); ++j) b[j] = 0.25f * static_cast<float>(j + 1);
  ASSERT_TRUE(kernels::cpu::dnnl_strided_matmul(p, a.data(), b.data(), nullptr, c.data()));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < b.size(); ++j) EXPECT_EQ(c[i * 6 + j], a[i] * b[j]) << i << "," << j;
}

// Which path the bf16 cases above took, for the log: oneDNN's bf16 kernels on a CPU with
// bf16 arithmetic, the fp32 kernels on widened inputs elsewhere (both must pass).
TEST(DnnlNumericsInfo, Bf16Path) {
  std::cout << "bf16 GEMM/convolution: "
            << (kernels::cpu::dnnl_bf16_native() ? "oneDNN bf16 kernels (AVX512-BF16)"
                                                 : "widened to fp32 (no bf16 arithmetic)")
            << "\n";
}

}  // namespace
}  // namespace ampc::rt::cpu
