// The CPU twins of the row-wise, reduction and AMP CUDA kernels (kernels/twin) against the CPU
// backend's operators (run through the op registry) on random inputs. Softmax, LogSoftmax,
// LayerNormalization and SoftmaxCrossEntropyLoss: the CPU op runs the twin, so the two must be
// bit-identical in every dtype (the single-source guarantee: the CPU op gives the GPU kernel's
// bits; tests/gpu compares the kernels with the twins). The reductions: fp32 within 1e-5
// relative (the CPU op reduces in another order), fp16 and bf16 within one unit in the last
// place of the 16-bit result on top of that; the AMP ops bit for bit where the arithmetic is
// the same. The CPU ops themselves are checked against references in cpu_*_test.cc and against
// PyTorch and finite differences elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/half.h"
#include "kernels/shared/rowwise_fp.h"
#include "kernels/twin/amp.h"
#include "kernels/twin/cross_entropy.h"
#include "kernels/twin/layernorm.h"
#include "kernels/twin/reduce.h"
#include "kernels/twin/softmax.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::rt::cpu::optest {
namespace {

namespace twin = kernels::twin;

const DType kFloatTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
// The row-wise twins also serve the CPU op's f64 (which no device kernel has).
const DType kRowTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};

std::vector<double> random_values(size_t n, uint32_t seed, double scale = 3.0) {
  std::vector<double> v = pseudo_random(n, seed);
  for (double& x : v) x *= scale;
  return v;
}

// One unit in the last place of `dtype` at the magnitude of v (0 for fp32 and fp64).
double ulp_of(DType dtype, double v) {
  const int bits = dtype == DType::kFloat16 ? 10 : (dtype == DType::kBFloat16 ? 7 : 0);
  if (bits == 0) return 0;
  const double a = std::max(std::abs(v), dtype == DType::kFloat16 ? 6.103515625e-05 : 1e-30);
  return std::ldexp(1.0, std::ilogb(a) - bits);
}

// got (twin) vs want (CPU op): within 1e-5 relative to max(|want|, floor), plus one 16-bit ulp.
// NaN must match NaN, infinities must match exactly.
void expect_agree(const Tensor& got, const Tensor& want, double floor, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.numel(), want.numel()) << what;
  const std::vector<double> g = values(got), w = values(want);
  int failures = 0;
  for (size_t i = 0; i < g.size() && failures < 5; ++i) {
    if (std::isnan(w[i]) || std::isinf(w[i])) {
      const bool same = std::isnan(w[i]) ? std::isnan(g[i]) : g[i] == w[i];
      EXPECT_TRUE(same) << what << " element " << i << ": twin " << g[i] << ", CPU op " << w[i];
      failures += !same;
      continue;
    }
    const double tol = 1e-5 * std::max(std::abs(w[i]), floor) + ulp_of(want.dtype(), w[i]);
    const bool ok = std::abs(g[i] - w[i]) <= tol;
    EXPECT_TRUE(ok) << what << " element " << i << ": twin " << g[i] << ", CPU op " << w[i]
                    << " (tolerance " << tol << ")";
    failures += !ok;
  }
}

void expect_bits_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.nbytes(), want.nbytes()) << what;
  if (got.nbytes() > 0) {
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0) << what;
  }
}

// ---- The shared scalar math (kernels/shared/rowwise_fp.h) ----

namespace sh = kernels::shared;

TEST(TwinRowwise, SharedConversionsAreBitIdenticalToBaseHalf) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    ASSERT_EQ(sh::to_bits(sh::load_half(Half{h})), float_bits(half_to_float(Half{h}))) << b;
    ASSERT_EQ(sh::to_bits(sh::load_bf16(BFloat16{h})), float_bits(bf16_to_float(BFloat16{h}))) << b;
  }
  // Every 61st fp32 pattern (all exponents, both signs, NaNs) plus the fp16 halfway points.
  for (uint64_t b = 0; b <= 0xffffffffull; b += 61) {
    const float f = bits_float(static_cast<uint32_t>(b));
    ASSERT_EQ(sh::round_half(f).bits, float_to_half(f).bits) << b;
    ASSERT_EQ(sh::round_bf16(f).bits, float_to_bf16(f).bits) << b;
  }
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const uint32_t mid = float_bits(half_to_float(Half{static_cast<uint16_t>(h)})) + 0x1000u;
    ASSERT_EQ(sh::round_half(bits_float(mid)).bits, float_to_half(bits_float(mid)).bits) << h;
  }
}

// Units in the last place of got against the exact value (fp32 grid at want's magnitude).
double ulps(float got, double want) {
  const float w = static_cast<float>(want);
  const double u = w == 0 ? 1.4e-45 : std::nextafter(std::abs(w), INFINITY) - std::abs(w);
  return std::abs(static_cast<double>(got) - want) / u;
}

// exp is float_math.h's exp_f32, checked by float_math_test.cc.
TEST(TwinRowwise, SharedLogIsWithinTwoUlp) {
  for (uint32_t b = 1; b < 0x7f800000u; b += 1009) {  // positive finite floats, subnormals too
    const float x = bits_float(b);
    ASSERT_LE(ulps(sh::log_f(x), std::log(static_cast<double>(x))), 2.0) << "log " << x;
  }
  EXPECT_EQ(sh::log_f(0.0f), -INFINITY);
  EXPECT_TRUE(std::isnan(sh::log_f(-1.0f)));
  EXPECT_EQ(sh::log_f(INFINITY), INFINITY);
  EXPECT_EQ(sh::log_f(1.0f), 0.0f);
}

// ---- Softmax / LogSoftmax ----

struct SoftmaxCase {
  std::vector<int64_t> shape;
  int64_t axis;
};

TEST(TwinRowwise, SoftmaxAndLogSoftmaxAreBitIdenticalToTheCpuOps) {
  // Warp rows (33), block rows with 4-element chunks (1024, 20000) and without (1030), columns.
  const std::vector<SoftmaxCase> cases = {{{7, 33}, -1},    {{5, 1024}, 1},  {{4, 1030}, -1},
                                          {{3, 20000}, -1}, {{2, 17, 5}, 1}, {{6, 3, 4}, 0},
                                          {{1, 1}, -1},     {{3, 4, 40}, 2}};
  for (DType dtype : kRowTypes) {
    for (const SoftmaxCase& c : cases) {
      int64_t count = 1;
      for (int64_t d : c.shape) count *= d;
      std::vector<double> v = random_values(static_cast<size_t>(count), 11 + count, 8.0);
      if (count > 40) {  // large and very negative scores, -inf (a zero probability)
        v[3] = 80.0;
        v[5] = -std::numeric_limits<double>::infinity();
        v[count - 1] = -120.0;
      }
      const Tensor x = make(dtype, c.shape, v);
      const int64_t rank = static_cast<int64_t>(c.shape.size());
      const int64_t axis = c.axis < 0 ? c.axis + rank : c.axis;
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < axis; ++i) outer *= c.shape[i];
      for (int64_t i = axis + 1; i < rank; ++i) inner *= c.shape[i];
      for (bool log : {false, true}) {
        const std::string what = std::string(log ? "LogSoftmax " : "Softmax ") + x.type_str() +
                                 " axis " + std::to_string(c.axis);
        const Tensor want =
            run(log ? "LogSoftmax" : "Softmax", {x}, {attr_i("axis", c.axis)}, 1, 13)[0];
        Tensor got(dtype, c.shape);
        twin::softmax(dtype, x.raw(), got.raw(), outer, c.shape[axis], inner, log);
        expect_bits_equal(got, want, what);
        // In place (y aliases x) gives the same bits.
        Tensor in_place = x;
        twin::softmax(dtype, in_place.raw(), in_place.raw(), outer, c.shape[axis], inner, log);
        expect_bits_equal(in_place, got, what + " in place");
      }
    }
  }
}

TEST(TwinRowwise, SoftmaxRefusesIntegerTypes) {
  int32_t x[4] = {}, y[4] = {};
  try {
    twin::softmax(DType::kInt32, x, y, 1, 4, 1, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("i32 is not supported"), std::string::npos) << e.what();
  }
}

// ---- LayerNormalization ----

TEST(TwinRowwise, LayerNormIsBitIdenticalToTheCpuOpWithStatistics) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
    bool bias;
  };
  const std::vector<Case> cases = {{{6, 40}, -1, true},
                                   {{4, 2048}, 1, true},
                                   {{3, 4, 10}, -2, false},
                                   {{2, 20001}, -1, true},
                                   {{5, 7}, 0, true}};
  for (DType dtype : kRowTypes) {
    // f64 runs with f64 parameters and statistics only (the CPU op's f64 path).
    const bool f64 = dtype == DType::kFloat64;
    for (DType param_dtype : {f64 ? dtype : DType::kFloat32, dtype}) {
      for (const Case& c : cases) {
        const int64_t rank = static_cast<int64_t>(c.shape.size());
        const int64_t axis = c.axis < 0 ? c.axis + rank : c.axis;
        int64_t rows = 1, cols = 1;
        for (int64_t i = 0; i < rank; ++i) (i < axis ? rows : cols) *= c.shape[i];
        const std::vector<int64_t> norm_shape(c.shape.begin() + axis, c.shape.end());
        std::vector<double> xv = random_values(static_cast<size_t>(rows * cols), 3 + cols, 2.0);
        for (double& v : xv) v += 1.5;  // a mean away from 0
        const Tensor x = make(dtype, c.shape, xv);
        const Tensor scale = make(param_dtype, norm_shape, random_values(cols, 5, 1.0));
        const Tensor bias = make(param_dtype, norm_shape, random_values(cols, 7, 0.5));
        const std::string what = "LayerNormalization " + x.type_str() + " scale " +
                                 scale.type_str() + (c.bias ? " with bias" : "");
        std::vector<Tensor> inputs = {x, scale};
        if (c.bias) inputs.push_back(bias);
        const std::vector<Tensor> want =
            run("LayerNormalization", inputs, {attr_i("axis", c.axis), attr_f("epsilon", 1e-3f)}, 3,
                17);
        const DType stat_dtype = f64 ? DType::kFloat64 : DType::kFloat32;
        Tensor y(dtype, c.shape), mean(stat_dtype, want[1].shape()),
            inv_std(stat_dtype, want[2].shape());
        twin::layer_norm(dtype, x.raw(), rows, cols, param_dtype, scale.raw(),
                         c.bias ? bias.raw() : nullptr, 1e-3f, y.raw(), stat_dtype, mean.raw(),
                         inv_std.raw());
        expect_bits_equal(y, want[0], what + ": Y");
        // The op stores its statistics in stash_type (f32 by default): f64 ones rounded once.
        expect_bits_equal(f64 ? make(DType::kFloat32, mean.shape(), values(mean)) : mean, want[1],
                          what + ": Mean");
        expect_bits_equal(f64 ? make(DType::kFloat32, inv_std.shape(), values(inv_std)) : inv_std,
                          want[2], what + ": InvStdDev");
      }
    }
  }
}

// Equal bits, or NaN on both sides (which payload an add keeps is the compiler's choice).
void expect_same_floats(const std::vector<float>& a, const std::vector<float>& b,
                        const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool equal = std::memcmp(&a[i], &b[i], 4) == 0 || (std::isnan(a[i]) && std::isnan(b[i]));
    if (!equal && differ++ < 3)
      ADD_FAILURE() << what << " element " << i << ": " << a[i] << " vs " << b[i];
  }
  EXPECT_EQ(differ, 0) << what;
}

// The f32 rows run on AVX-512 loops where the CPU has them (kernels/twin/layernorm.cc): the
// generic loops' bits, forward and backward, on rows of every length the block partitions
// differently, values of every magnitude and the specials (a NaN's payload aside).
TEST(TwinRowwise, LayerNormVectorLoopsGiveTheGenericBits) {
  for (const int64_t cols : {1, 7, 16, 33, 100, 512, 1000, 4096}) {
    const int64_t rows = 37;
    std::vector<double> xv = random_values(static_cast<size_t>(rows * cols), 11 + cols, 4.0);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] *= std::ldexp(1.0, static_cast<int>(i % 41) - 20);
    std::vector<float> x(xv.begin(), xv.end()), dy(x.size());
    const std::vector<double> dv = random_values(x.size(), 13 + cols, 2.0);
    for (size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(dv[i]);
    if (cols >= 16) {  // specials in row 3 (its statistics NaN) and a huge row 5
      x[3 * cols + 2] = std::numeric_limits<float>::quiet_NaN();
      x[3 * cols + 5] = std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < cols; ++j) x[5 * cols + j] *= 1e30f;
      dy[7 * cols + 1] = -std::numeric_limits<float>::infinity();
    }
    const std::vector<double> sv = random_values(cols, 5, 1.0), bv = random_values(cols, 7, 0.5);
    const std::vector<float> scale(sv.begin(), sv.end()), bias(bv.begin(), bv.end());
    const std::string what = std::to_string(rows) + " rows of " + std::to_string(cols);
    std::vector<char> ws(twin::layer_norm_grad_workspace_bytes(DType::kFloat32, rows, cols));
    struct Out {
      std::vector<float> y, mean, inv, dx, ds, db;
    } out[2];
    const twin::RowLoops loops[2] = {twin::RowLoops::kBest, twin::RowLoops::kGeneric};
    for (int k = 0; k < 2; ++k) {
      Out& o = out[k];
      o.y.resize(x.size());
      o.mean.resize(rows);
      o.inv.resize(rows);
      o.dx.resize(x.size());
      o.ds.resize(cols);
      o.db.resize(cols);
      twin::layer_norm(DType::kFloat32, x.data(), rows, cols, DType::kFloat32, scale.data(),
                       bias.data(), 1e-5f, o.y.data(), DType::kFloat32, o.mean.data(), o.inv.data(),
                       loops[k]);
      twin::layer_norm_grad(DType::kFloat32, DType::kFloat32, x.data(), dy.data(), rows, cols,
                            DType::kFloat32, scale.data(), 1e-5f, o.dx.data(), o.ds.data(),
                            o.db.data(), ws.data(), loops[k]);
    }
    expect_same_floats(out[0].y, out[1].y, what + ": Y");
    expect_same_floats(out[0].mean, out[1].mean, what + ": Mean");
    expect_same_floats(out[0].inv, out[1].inv, what + ": InvStdDev");
    expect_same_floats(out[0].dx, out[1].dx, what + ": dX");
    expect_same_floats(out[0].ds, out[1].ds, what + ": dScale");
    expect_same_floats(out[0].db, out[1].db, what + ": dBias");
  }
}

// SoftmaxGrad's f32 rows on AVX-512 loops (kernels/twin/softmax.cc): the generic loops' bits,
// for Softmax and LogSoftmax, rows of every partition, a huge dY row and specials.
TEST(TwinRowwise, SoftmaxGradVectorLoopsGiveTheGenericBits) {
  for (const bool log : {false, true}) {
    for (const int64_t n : {1, 7, 16, 33, 100, 128, 1000, 4096}) {
      const int64_t rows = 29;
      const std::vector<double> xv = random_values(static_cast<size_t>(rows * n), 17 + n, 3.0);
      std::vector<float> x(xv.begin(), xv.end()), y(x.size()), dy(x.size());
      twin::softmax(DType::kFloat32, x.data(), y.data(), rows, n, 1, log);
      const std::vector<double> dv = random_values(x.size(), 19 + n, 2.0);
      for (size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(dv[i]);
      if (n >= 16) {
        dy[2 * n + 3] = std::numeric_limits<float>::quiet_NaN();
        dy[4 * n + 1] = std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < n; ++j) dy[6 * n + j] *= 1e35f;
      }
      std::vector<float> best(x.size()), generic(x.size());
      twin::softmax_grad(DType::kFloat32, DType::kFloat32, y.data(), dy.data(), best.data(), rows,
                         n, 1, log, twin::RowLoops::kBest);
      twin::softmax_grad(DType::kFloat32, DType::kFloat32, y.data(), dy.data(), generic.data(),
                         rows, n, 1, log, twin::RowLoops::kGeneric);
      expect_same_floats(
          best, generic,
          std::string(log ? "LogSoftmax" : "Softmax") + " rows of " + std::to_string(n));
    }
  }
}

// ---- SoftmaxCrossEntropyLoss ----

struct CeCase {
  std::vector<int64_t> shape;  // [n, c, d...]
  std::string reduction;
  bool ignore, weight, int32_labels;
};

// A case's sizes: n samples, classes, d positions each, the labels' shape, the reduction.
struct CeDims {
  int64_t n = 0, classes = 0, d = 1;
  std::vector<int64_t> label_shape;
  twin::CeReduction red = twin::CeReduction::kMean;
};

CeDims dims_of(const CeCase& c) {
  CeDims s;
  s.n = c.shape[0];
  s.classes = c.shape[1];
  for (size_t i = 2; i < c.shape.size(); ++i) s.d *= c.shape[i];
  s.label_shape = c.shape;
  s.label_shape.erase(s.label_shape.begin() + 1);
  s.red = c.reduction == "none"  ? twin::CeReduction::kNone
          : c.reduction == "sum" ? twin::CeReduction::kSum
                                 : twin::CeReduction::kMean;
  return s;
}

TEST(TwinRowwise, SoftmaxCrossEntropyIsBitIdenticalToTheCpuOp) {
  const std::vector<CeCase> cases = {
      {{8, 10}, "mean", false, false, false},  {{8, 10}, "sum", true, false, true},
      {{8, 10}, "none", true, true, false},    {{4, 5, 3}, "mean", true, true, true},
      {{2048, 3}, "sum", true, false, false},  {{4, 5, 3}, "none", false, false, false},
      {{3, 2000}, "mean", true, false, false}, {{2, 7, 2, 3}, "sum", false, true, false},
      {{600, 3}, "mean", true, true, false}};
  for (DType dtype : kRowTypes) {
    for (const CeCase& c : cases) {
      const auto [n, classes, d, label_shape, red] = dims_of(c);
      const Tensor x = make(dtype, c.shape, random_values(n * classes * d, 17 + n, 4.0));
      std::vector<double> lv(n * d);
      for (size_t i = 0; i < lv.size(); ++i) lv[i] = static_cast<double>((i * 7 + 3) % classes);
      const int64_t ignore_index = 2;
      const DType label_dtype = c.int32_labels ? DType::kInt32 : DType::kInt64;
      const Tensor labels = make(label_dtype, label_shape, lv);
      std::vector<double> wv = random_values(classes, 23, 1.0);
      for (double& w : wv) w = 1.0 + w * 0.5;
      const Tensor weight = make(dtype, {classes}, wv);
      std::vector<plan::Attribute> attrs = {attr_s("reduction", c.reduction)};
      if (c.ignore) attrs.push_back(attr_i("ignore_index", ignore_index));
      std::vector<Tensor> inputs = {x, labels};
      if (c.weight) inputs.push_back(weight);
      const std::string what = "SoftmaxCrossEntropyLoss " + x.type_str() + " " + c.reduction +
                               (c.ignore ? " ignore" : "") + (c.weight ? " weighted" : "");
      const std::vector<Tensor> want = run("SoftmaxCrossEntropyLoss", inputs, attrs, 2, 13);
      Tensor loss(dtype, want[0].shape()), log_prob(dtype, c.shape);
      std::vector<double> ws(twin::softmax_cross_entropy_workspace_bytes(n, classes, d, red) / 8 +
                             1);
      twin::softmax_cross_entropy(dtype, x.raw(), label_dtype, labels.raw(), n, classes, d, dtype,
                                  c.weight ? weight.raw() : nullptr, c.ignore, ignore_index, red,
                                  loss.raw(), log_prob.raw(), ws.data());
      expect_bits_equal(loss, want[0], what + ": loss");
      expect_bits_equal(log_prob, want[1], what + ": log_prob");
      // Without the log_prob output: the same loss bits.
      Tensor loss2(dtype, want[0].shape());
      twin::softmax_cross_entropy(dtype, x.raw(), label_dtype, labels.raw(), n, classes, d, dtype,
                                  c.weight ? weight.raw() : nullptr, c.ignore, ignore_index, red,
                                  loss2.raw(), nullptr, ws.data());
      expect_bits_equal(loss2, loss, what + ": loss without log_prob");
    }
  }
}

// 16-bit scores read widened (ampc.SoftmaxCrossEntropyLoss, float outputs): the bits of the
// float op on the scores widened first, as Cast + SoftmaxCrossEntropyLoss computes them.
TEST(TwinRowwise, WidenedScoresGiveTheFloatOpsBits) {
  const std::vector<CeCase> cases = {{{8, 10}, "mean", false, false, false},
                                     {{8, 10}, "none", true, true, false},
                                     {{4, 5, 3}, "mean", true, true, true},
                                     {{3, 2000}, "sum", true, false, false},
                                     {{600, 3}, "mean", true, true, false}};
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (const CeCase& c : cases) {
      const auto [n, classes, d, label_shape, red] = dims_of(c);
      const Tensor x = make(dtype, c.shape, random_values(n * classes * d, 29 + n, 6.0));
      const Tensor wide = make(DType::kFloat32, c.shape, values(x));  // exact
      std::vector<double> lv(n * d);
      for (size_t i = 0; i < lv.size(); ++i) lv[i] = static_cast<double>((i * 5 + 1) % classes);
      const DType label_dtype = c.int32_labels ? DType::kInt32 : DType::kInt64;
      const Tensor labels = make(label_dtype, label_shape, lv);
      std::vector<double> wv = random_values(classes, 31, 1.0);
      for (double& w : wv) w = 1.0 + w * 0.5;
      const Tensor weight = make(DType::kFloat32, {classes}, wv);
      const std::vector<int64_t> loss_shape =
          red == twin::CeReduction::kNone ? label_shape : std::vector<int64_t>{};
      std::vector<double> ws(twin::softmax_cross_entropy_workspace_bytes(n, classes, d, red) / 8 +
                             1);
      Tensor loss(DType::kFloat32, loss_shape), log_prob(DType::kFloat32, c.shape);
      Tensor want_loss(DType::kFloat32, loss_shape), want_log_prob(DType::kFloat32, c.shape);
      const void* w = c.weight ? weight.raw() : nullptr;
      twin::softmax_cross_entropy(dtype, x.raw(), label_dtype, labels.raw(), n, classes, d,
                                  DType::kFloat32, w, c.ignore, 2, red, loss.raw(), log_prob.raw(),
                                  ws.data(), nullptr, DType::kFloat32);
      twin::softmax_cross_entropy(DType::kFloat32, wide.raw(), label_dtype, labels.raw(), n,
                                  classes, d, DType::kFloat32, w, c.ignore, 2, red, want_loss.raw(),
                                  want_log_prob.raw(), ws.data());
      const std::string what = "widened " + x.type_str() + " " + c.reduction;
      expect_bits_equal(loss, want_loss, what + ": loss");
      expect_bits_equal(log_prob, want_log_prob, what + ": log_prob");
    }
  }
  // Only 16-bit scores widen, and only to float.
  const Tensor x = make(DType::kFloat32, {2, 3}, random_values(6, 3));
  const Tensor labels = make(DType::kInt64, {2}, {0, 2});
  Tensor loss(DType::kFloat16, {});
  std::vector<double> ws(16);
  EXPECT_THROW(
      twin::softmax_cross_entropy(DType::kFloat32, x.raw(), DType::kInt64, labels.raw(), 2, 3, 1,
                                  DType::kFloat32, nullptr, false, 0, twin::CeReduction::kMean,
                                  loss.raw(), nullptr, ws.data(), nullptr, DType::kFloat16),
      Error);
}

// The row ops' backwards with a 16-bit dY read widened (ampc.SoftmaxGrad and
// LayerNormalizationGrad with their dY's Cast folded in, passes/widened_row_grads.h): the bits of
// the float32 op on the same dY widened, on the vector and the generic loops; a dY that would
// narrow, or a 16-bit one beside f64, refused.
TEST(TwinRowwise, WidenedRowGradsGiveTheFloatOpsBits) {
  struct SoftmaxCase {
    int64_t outer, n, inner;
  };
  const SoftmaxCase softmax_cases[] = {{29, 128, 1}, {5, 1000, 1}, {3, 7, 4}, {2, 33, 1}};
  const twin::RowLoops loops[] = {twin::RowLoops::kBest, twin::RowLoops::kGeneric};
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (const bool log : {false, true}) {
      for (const SoftmaxCase& c : softmax_cases) {
        const int64_t count = c.outer * c.n * c.inner;
        const Tensor x = make(DType::kFloat32, {count}, random_values(count, 41 + count, 3.0));
        Tensor y(DType::kFloat32, {count});
        twin::softmax(DType::kFloat32, x.raw(), y.raw(), c.outer, c.n, c.inner, log);
        const Tensor dy = make(dtype, {count}, random_values(count, 43 + count, 2.0));
        const Tensor wide = make(DType::kFloat32, {count}, values(dy));  // exact
        Tensor want(DType::kFloat32, {count});
        twin::softmax_grad(DType::kFloat32, DType::kFloat32, y.raw(), wide.raw(), want.raw(),
                           c.outer, c.n, c.inner, log);
        for (const twin::RowLoops l : loops) {
          Tensor dx(DType::kFloat32, {count});
          twin::softmax_grad(DType::kFloat32, dtype, y.raw(), dy.raw(), dx.raw(), c.outer, c.n,
                             c.inner, log, l);
          expect_bits_equal(dx, want,
                            std::string(log ? "log_softmax_grad " : "softmax_grad ") +
                                dy.type_str() + " [" + std::to_string(c.outer) + "," +
                                std::to_string(c.n) + "," + std::to_string(c.inner) + "]");
        }
      }
    }
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{16, 512}, {7, 33}, {3, 3000}}) {
      const int64_t count = rows * cols;
      const Tensor x = make(DType::kFloat32, {count}, random_values(count, 47 + count, 4.0));
      const Tensor scale = make(DType::kFloat32, {cols}, random_values(cols, 53, 1.0));
      const Tensor dy = make(dtype, {count}, random_values(count, 59 + count, 1.0));
      const Tensor wide = make(DType::kFloat32, {count}, values(dy));
      std::vector<char> ws(twin::layer_norm_grad_workspace_bytes(DType::kFloat32, rows, cols));
      Tensor want_dx(DType::kFloat32, {count}), want_ds(DType::kFloat32, {cols}),
          want_db(DType::kFloat32, {cols});
      twin::layer_norm_grad(DType::kFloat32, DType::kFloat32, x.raw(), wide.raw(), rows, cols,
                            DType::kFloat32, scale.raw(), 1e-5f, want_dx.raw(), want_ds.raw(),
                            want_db.raw(), ws.data());
      for (const twin::RowLoops l : loops) {
        Tensor dx(DType::kFloat32, {count}), ds(DType::kFloat32, {cols}),
            db(DType::kFloat32, {cols});
        twin::layer_norm_grad(DType::kFloat32, dtype, x.raw(), dy.raw(), rows, cols,
                              DType::kFloat32, scale.raw(), 1e-5f, dx.raw(), ds.raw(), db.raw(),
                              ws.data(), l);
        const std::string what = "layer_norm_grad " + dy.type_str() + " [" + std::to_string(rows) +
                                 "," + std::to_string(cols) + "]";
        expect_bits_equal(dx, want_dx, what + ": dX");
        expect_bits_equal(ds, want_ds, what + ": dScale");
        expect_bits_equal(db, want_db, what + ": dBias");
      }
    }
  }
  // Only 16-bit dY widens, and only where the op computes in float.
  const Tensor y16 = make(DType::kBFloat16, {4}, {0.25, 0.25, 0.25, 0.25});
  const Tensor d32 = make(DType::kFloat32, {4}, {1, 2, 3, 4});
  const Tensor y64 = make(DType::kFloat64, {4}, {0.25, 0.25, 0.25, 0.25});
  const Tensor d16 = make(DType::kBFloat16, {4}, {1, 2, 3, 4});
  Tensor out(DType::kFloat64, {4});
  EXPECT_THROW(twin::softmax_grad(DType::kBFloat16, DType::kFloat32, y16.raw(), d32.raw(),
                                  out.raw(), 1, 4, 1, false),
               Error);
  EXPECT_THROW(twin::softmax_grad(DType::kFloat64, DType::kBFloat16, y64.raw(), d16.raw(),
                                  out.raw(), 1, 4, 1, false),
               Error);
  std::vector<char> ws(twin::layer_norm_grad_workspace_bytes(DType::kFloat64, 1, 4));
  EXPECT_THROW(twin::layer_norm_grad(DType::kFloat64, DType::kBFloat16, y64.raw(), d16.raw(), 1, 4,
                                     DType::kFloat64, y64.raw(), 1e-5f, out.raw(), nullptr, nullptr,
                                     ws.data()),
               Error);
}

TEST(TwinRowwise, CrossEntropyInvalidLabelGivesNanWhereTheCpuOpFails) {
  const Tensor x = make(DType::kFloat32, {3, 4}, random_values(12, 5));
  const Tensor labels = make(DType::kInt64, {3}, {1, 4, 0});
  EXPECT_NE(run_error("SoftmaxCrossEntropyLoss", {x, labels}, {attr_s("reduction", "none")}, 1, 13)
                .find("is not a class index"),
            std::string::npos);
  Tensor loss(DType::kFloat32, {3});
  twin::softmax_cross_entropy(DType::kFloat32, x.raw(), DType::kInt64, labels.raw(), 3, 4, 1,
                              DType::kFloat32, nullptr, false, 0, twin::CeReduction::kNone,
                              loss.raw(), nullptr, nullptr);
  const std::vector<double> v = values(loss);
  EXPECT_FALSE(std::isnan(v[0]));
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_FALSE(std::isnan(v[2]));
}

// ---- Reductions ----

struct ReduceCase {
  std::vector<int64_t> shape;
  std::vector<int64_t> axes;
};

const char* const kReduceOps[] = {"ReduceSum", "ReduceMean",   "ReduceProd",
                                  "ReduceMax", "ReduceMin",    "ReduceL1",
                                  "ReduceL2",  "ReduceLogSum", "ReduceSumSquare"};

TEST(TwinRowwise, ReductionsMatchTheCpuOps) {
  // Rows by warps and blocks, rows split into pieces (few outputs), columns with and without
  // pieces ([B*T, N] -> [N]), per channel ([N, C, S] over N and S), several reduced groups
  // (general), everything.
  const std::vector<ReduceCase> cases = {
      {{6, 50}, {1}},
      {{3, 40000}, {1}},
      {{1, 300000}, {1}},
      {{512, 96}, {0}},
      {{4, 30, 7}, {1}},
      {{4, 30, 7}, {0, 2}},
      {{5, 6, 7}, {}},
      {{2, 3, 4, 5}, {0, 2}},
      {{2, 1, 9}, {0, 1}},
      {{4096, 3}, {0}},
      {{3, 5}, {1}},
      // Per channel (rows x columns): a conv bias gradient's shape; rows cut into pieces.
      {{16, 8, 14, 14}, {0, 2, 3}},
      {{2, 3, 70000}, {0, 2}}};
  for (DType dtype : kFloatTypes) {
    for (const ReduceCase& c : cases) {
      int64_t count = 1;
      for (int64_t d : c.shape) count *= d;
      const int rank = static_cast<int>(c.shape.size());
      bool reduced[8] = {};
      for (int i = 0; i < rank; ++i) reduced[i] = c.axes.empty();
      for (int64_t a : c.axes) reduced[a] = true;
      std::vector<int64_t> out_shape;
      int64_t reduced_count = 1;
      for (int i = 0; i < rank; ++i) {
        if (!reduced[i])
          out_shape.push_back(c.shape[i]);
        else
          reduced_count *= c.shape[i];
      }
      for (int op = 0; op < 9; ++op) {
        const std::string op_name = kReduceOps[op];
        std::vector<double> v = random_values(static_cast<size_t>(count), 31 + op + count);
        if (op == 2) {  // Prod: factors near 1
          for (double& x : v) x = 1.0 + x / 3.0 * (count > 1000 ? 0.001 : 0.1);
        }
        if (op == 7) {  // LogSum: positive terms
          for (double& x : v) x = std::abs(x) + 0.1;
        }
        if ((op == 3 || op == 4) && count > 100) v[count / 2] = std::nan("");
        const Tensor x = make(dtype, c.shape, v);
        const Tensor axes = make(DType::kInt64, {static_cast<int64_t>(c.axes.size())},
                                 std::vector<double>(c.axes.begin(), c.axes.end()));
        const std::string what =
            op_name + " " + x.type_str() + " over " + std::to_string(c.axes.size()) + " axes";
        const Tensor want = run(op_name, {x, axes}, {attr_i("keepdims", 0)}, 1, 18)[0];
        Tensor got(dtype, out_shape);
        const auto rop = static_cast<twin::ReduceOp>(op);
        std::vector<double> ws(
            twin::reduce_workspace_bytes(rop, dtype, rank, c.shape.data(), reduced) / 8 + 1);
        twin::reduce(rop, dtype, x.raw(), got.raw(), rank, c.shape.data(), reduced, ws.data());
        // Reordered fp32 sums and products: besides 1e-5 relative, a rounding-walk bound of
        // 8 sqrt(n) ulp of the sum of the terms' magnitudes (the CPU op adds sequentially, its
        // own error grows that way).
        double abs_sum = 0, sq_sum = 0;
        for (double e : values(x)) {
          if (std::isnan(e)) continue;
          abs_sum += std::abs(e);
          sq_sum += e * e;
        }
        const double per_output = static_cast<double>(reduced_count) / static_cast<double>(count);
        const double walk = 8.0 * std::sqrt(static_cast<double>(reduced_count)) * 0x1p-24 / 1e-5;
        const double s1 = abs_sum * per_output, s2 = sq_sum * per_output;
        const double floors[9] = {walk * s1,
                                  walk * s1 / static_cast<double>(reduced_count),
                                  std::max(1.0, 2.0 * walk),
                                  1.0,
                                  1.0,
                                  walk * s1,
                                  std::max(1.0, walk * std::sqrt(s2) / 2.0),
                                  std::max(1.0, walk),
                                  walk * s2};
        const double floor = floors[op];
        expect_agree(got, want, floor, what);
      }
    }
  }
}

TEST(TwinRowwise, ReduceRefusesRankAboveEight) {
  const int64_t dims[9] = {1, 1, 1, 1, 1, 1, 1, 1, 2};
  const bool reduced[9] = {};
  float x[2] = {}, y[2] = {};
  EXPECT_THROW(twin::reduce(twin::ReduceOp::kSum, DType::kFloat32, x, y, 9, dims, reduced, nullptr),
               Error);
}

// ---- The loss scaler's ops ----

Tensor scalar(DType dtype, double v) {
  return make(dtype, {}, {v});
}
Tensor bool_scalar(bool v) {
  Tensor t(DType::kBool, {});
  static_cast<uint8_t*>(t.raw())[0] = v ? 1 : 0;
  return t;
}

TEST(TwinRowwise, UnscaleCheckIsBitIdenticalToTheCpuOp) {
  for (bool inject : {false, true}) {
    std::vector<Tensor> grads = {make(DType::kFloat32, {40000}, random_values(40000, 1, 1000.0)),
                                 make(DType::kFloat16, {300}, random_values(300, 2, 1000.0)),
                                 make(DType::kBFloat16, {7, 5}, random_values(35, 3, 1000.0)),
                                 make(DType::kFloat64, {17}, random_values(17, 4, 1000.0)),
                                 Tensor(DType::kFloat32, {0})};
    if (inject) grads[1].data<Half>()[123] = Half{0x7c00};  // fp16 inf
    const float inv = 1.0f / 1024.0f * 3.0f;
    std::vector<Tensor> inputs = {scalar(DType::kFloat32, inv)};
    for (const Tensor& g : grads) inputs.push_back(g);
    const std::vector<Tensor> want =
        run("UnscaleCheck", inputs, {}, static_cast<int>(grads.size()) + 1, 1, "ampc");
    std::vector<Tensor> outs;
    std::vector<DType> dtypes;
    std::vector<const void*> in_ptrs;
    std::vector<void*> out_ptrs;
    std::vector<int64_t> numels;
    for (const Tensor& g : grads) outs.emplace_back(g.dtype(), g.shape());
    for (size_t j = 0; j < grads.size(); ++j) {
      dtypes.push_back(grads[j].dtype());
      in_ptrs.push_back(grads[j].raw());
      out_ptrs.push_back(outs[j].raw());
      numels.push_back(grads[j].numel());
    }
    bool found = !inject;
    twin::unscale_check(static_cast<int64_t>(grads.size()), dtypes.data(), in_ptrs.data(),
                        out_ptrs.data(), numels.data(), &inv, &found);
    EXPECT_EQ(found, static_cast<const uint8_t*>(want[0].raw())[0] != 0);
    EXPECT_EQ(found, inject);
    for (size_t j = 0; j < grads.size(); ++j)
      expect_bits_equal(outs[j], want[j + 1], "UnscaleCheck gradient " + std::to_string(j));
  }
}

TEST(TwinRowwise, UpdateScaleIsBitIdenticalToTheCpuOp) {
  struct Case {
    float scale;
    int32_t tracker;
    bool found;
    int64_t interval;
    bool min, max;
  };
  const std::vector<Case> cases = {
      {65536.0f, 3, false, 2000, false, false},   {65536.0f, 1999, false, 2000, false, false},
      {65536.0f, 1999, true, 2000, false, false}, {1.0f, 5, true, 2000, true, false},
      {3e38f, 0, false, 1, false, false},         {16777216.0f, 9, false, 10, false, true},
      {0.75f, 0, false, 1, false, true}};
  for (const Case& c : cases) {
    std::vector<plan::Attribute> attrs = {attr_f("growth_factor", 2.0f),
                                          attr_f("backoff_factor", 0.3f),
                                          attr_i("growth_interval", c.interval)};
    if (c.min) attrs.push_back(attr_f("min_scale", 0.5f));
    if (c.max) attrs.push_back(attr_f("max_scale", 16777216.0f));
    const std::vector<Tensor> want = run(
        "UpdateScale",
        {scalar(DType::kFloat32, c.scale), scalar(DType::kInt32, c.tracker), bool_scalar(c.found)},
        attrs, 2, 1, "ampc");
    float new_scale = 0;
    int32_t new_tracker = -1;
    twin::update_scale(&c.scale, &c.tracker, &c.found, 2.0f, 0.3f, c.interval, c.min, 0.5f, c.max,
                       16777216.0f, &new_scale, &new_tracker);
    EXPECT_EQ(kernels::shared::to_bits(new_scale),
              kernels::shared::to_bits(want[0].data<float>()[0]))
        << "scale " << c.scale << " tracker " << c.tracker;
    EXPECT_EQ(new_tracker, want[1].data<int32_t>()[0]);
  }
  float s = 1, ns;
  int32_t t = 0, nt;
  bool f = false;
  EXPECT_THROW(twin::update_scale(&s, &t, &f, 2, 0.5f, 0, false, 0, false, 0, &ns, &nt), Error);
}

TEST(TwinRowwise, ClipGradNormMatchesTheCpuOp) {
  const std::vector<Tensor> grads = {make(DType::kFloat32, {40000}, random_values(40000, 8, 0.1)),
                                     make(DType::kFloat16, {300}, random_values(300, 9, 2.0)),
                                     make(DType::kBFloat16, {33}, random_values(33, 10, 2.0)),
                                     make(DType::kFloat64, {17}, random_values(17, 11, 5.0))};
  std::vector<DType> dtypes;
  std::vector<const void*> in_ptrs;
  std::vector<int64_t> numels;
  for (const Tensor& g : grads) {
    dtypes.push_back(g.dtype());
    in_ptrs.push_back(g.raw());
    numels.push_back(g.numel());
  }
  for (float max_norm : {-1.0f, 1.5f, 1e6f}) {
    const bool clip = max_norm >= 0;
    std::vector<plan::Attribute> attrs;
    if (clip) attrs.push_back(attr_f("max_norm", max_norm));
    const std::vector<Tensor> want =
        run("ClipGradNorm", grads, attrs, clip ? static_cast<int>(grads.size()) + 1 : 1, 1, "ampc");
    std::vector<Tensor> outs;
    std::vector<void*> out_ptrs;
    for (const Tensor& g : grads) outs.emplace_back(g.dtype(), g.shape());
    for (Tensor& o : outs) out_ptrs.push_back(o.raw());
    std::vector<double> ws(
        twin::clip_grad_norm_workspace_bytes(static_cast<int64_t>(grads.size()), numels.data()) /
            8 +
        1);
    float total = 0;
    twin::clip_grad_norm(static_cast<int64_t>(grads.size()), dtypes.data(), in_ptrs.data(),
                         out_ptrs.data(), numels.data(), clip, max_norm, &total, ws.data());
    // fp64 sums in another order: the fp32 total agrees to its last bit or next to it.
    EXPECT_NEAR(total, want[0].data<float>()[0], 1e-6 * total) << "max_norm " << max_norm;
    if (!clip) continue;
    for (size_t j = 0; j < grads.size(); ++j)
      expect_agree(outs[j], want[j + 1], 0.0, "ClipGradNorm gradient " + std::to_string(j));
  }
}

}  // namespace
}  // namespace ampc::rt::cpu::optest
