// ampc.LayerNormalizationGrad, the backward of LayerNormalization (the CPU op runs the CUDA
// kernels' twin, kernels/twin/layernorm.cc): against PyTorch's formula evaluated in double on the
// same (rounded) inputs, and bit for bit against the kernels' three launches written out here
// with rowwise_tree.h's per-thread reference (row_reduce_host) and the chunked column sums.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/half.h"
#include "kernels/shared/rowwise.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::rt::cpu {
namespace {

using optest::attr_f;
using optest::attr_i;
using Dims = std::vector<int64_t>;
namespace sh = ampc::kernels::shared;

using optest::count;

Tensor random(DType t, const Dims& shape, uint32_t seed, double lo = -4, double hi = 4) {
  return optest::uniform(t, shape, seed, lo, hi);
}

struct Case {
  Dims shape;
  int64_t axis;
};
// Warp rows (40, 64), block rows of 256 threads (1100), a row of one element, a partial last
// chunk of rows (40 rows: 16, 16, 8) and the most chunks (5000 rows of 20: 250 chunks).
const Case kCases[] = {{{4, 5, 6}, -1}, {{3, 7, 9}, 1}, {{2, 1100}, 1},    {{40, 3}, -1},
                       {{3, 1}, 1},     {{5000, 8}, 1}, {{2, 4, 8, 2}, 2}, {{64, 64}, 1}};

std::vector<Tensor> run_grad(const Tensor& dy, const Tensor& x, const Tensor& scale, int64_t axis,
                             float eps, int outputs = 3) {
  return optest::run("LayerNormalizationGrad", {dy, x, scale},
                     {attr_i("axis", axis), attr_f("epsilon", eps)}, outputs, 1, "ampc");
}

// The gradients in double: per row mean, biased variance, xhat; g = dY scale;
// dX = (g - mean(g) - xhat mean(g xhat)) / std, dScale = sum(dY xhat), dB = sum(dY).
struct Exact {
  std::vector<double> dx, dscale, dbias;
};
Exact exact_grads(const Tensor& dy, const Tensor& x, const Tensor& scale, int64_t cols,
                  double eps) {
  const std::vector<double> xv = optest::values(x), gv = optest::values(dy),
                            sv = optest::values(scale);
  const auto rows = static_cast<int64_t>(xv.size()) / cols;
  Exact e{std::vector<double>(xv.size()), std::vector<double>(cols), std::vector<double>(cols)};
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = xv.data() + r * cols;
    const double* dr = gv.data() + r * cols;
    double m = 0, v = 0, sg = 0, sgx = 0;
    for (int64_t j = 0; j < cols; ++j) m += xr[j];
    m /= static_cast<double>(cols);
    for (int64_t j = 0; j < cols; ++j) v += (xr[j] - m) * (xr[j] - m);
    const double inv = 1 / std::sqrt(v / static_cast<double>(cols) + eps);
    for (int64_t j = 0; j < cols; ++j) {
      const double xhat = (xr[j] - m) * inv, g = dr[j] * sv[j];
      sg += g;
      sgx += g * xhat;
      e.dscale[j] += dr[j] * xhat;
      e.dbias[j] += dr[j];
    }
    for (int64_t j = 0; j < cols; ++j) {
      const double xhat = (xr[j] - m) * inv, g = dr[j] * sv[j];
      e.dx[r * cols + j] = inv * (g - sg / cols - xhat * sgx / cols);
    }
  }
  return e;
}

// |have - want| <= tol * the largest |want| + one rounding of the output type.
void expect_within(const std::vector<double>& want, const Tensor& have, double tol, double unit,
                   const std::string& what) {
  const std::vector<double> hv = optest::values(have);
  ASSERT_EQ(hv.size(), want.size()) << what;
  double largest = 0;
  for (double w : want) largest = std::max(largest, std::fabs(w));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_LE(std::fabs(hv[i] - want[i]), tol * largest + unit * std::fabs(want[i]))
        << what << " " << i << ": " << hv[i] << " vs " << want[i];
}

double unit_of(DType t) {
  return t == DType::kFloat16 ? 0x1p-11 : t == DType::kBFloat16 ? 0x1p-8 : 0;
}

// The bound: fp32 sums of up to 5000 terms (1e-4 of the largest magnitude) plus one rounding
// of a 16-bit output; f64 computes in double.
TEST(LayerNormGrad, MatchesTheDoubleFormula) {
  uint32_t seed = 500;
  for (const Case& c : kCases) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
      // f16 X with an f16 scale (the same type, as opset 17 requires); else fp32 parameters.
      const DType p = t == DType::kFloat32 ? DType::kFloat32 : t;
      const int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.shape.size()) : c.axis;
      const Dims norm(c.shape.begin() + axis, c.shape.end());
      const int64_t cols = count(norm);
      SCOPED_TRACE(std::string(dtype_name(t)) + " shape of " + std::to_string(count(c.shape)) +
                   " axis " + std::to_string(c.axis));
      const Tensor x = random(t, c.shape, seed++, -3, 5);
      const Tensor dy = random(t, c.shape, seed++);
      const Tensor scale = random(p, norm, seed++, 0.5, 2);
      const double eps = static_cast<double>(1e-3f);  // the attribute is a float
      const auto got = run_grad(dy, x, scale, c.axis, static_cast<float>(eps));
      ASSERT_EQ(got[0].dtype(), t);
      ASSERT_EQ(got[1].dtype(), p);
      ASSERT_EQ(got[2].shape(), norm);
      const Exact want = exact_grads(dy, x, scale, cols, eps);
      const double tol = t == DType::kFloat64 ? 1e-10 : 1e-4;
      expect_within(want.dx, got[0], tol, unit_of(t), "dX");
      expect_within(want.dscale, got[1], tol, unit_of(p), "dScale");
      expect_within(want.dbias, got[2], tol, unit_of(p), "dB");
      // dX alone (the parameter gradients not asked for) is the same dX.
      const auto alone = run_grad(dy, x, scale, c.axis, static_cast<float>(eps), 1);
      ASSERT_EQ(alone[0].nbytes(), got[0].nbytes());
      EXPECT_EQ(std::memcmp(alone[0].raw(), got[0].raw(), got[0].nbytes()), 0) << "dX alone";
    }
  }
}

// The kernels' order, fp32 math: launch 1 per row the statistics and the sums of g and g xhat as
// a block reduces them (row_reduce_host: thread partials, then the tree), dX; launch 2 per
// chunk and column the sums in row order; launch 3 per column the chunks in order.
template <typename T>
void expect_kernel_order(const Tensor& dy, const Tensor& x, const Tensor& scale, int64_t cols,
                         float eps, const std::vector<Tensor>& got, const std::string& what) {
  const auto rows = x.numel() / cols;
  const T* xv = x.data<T>();
  const T* dv = dy.data<T>();
  const float* sv = scale.data<float>();
  auto ld = [](T v) { return sh::Elem<T>::load(v); };
  auto sum = [](float a, float b) { return sh::add(a, b); };
  const sh::RowPlan plan = sh::row_plan(cols);
  std::vector<float> stats(2 * rows);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = xv + r * cols;
    const T* dr = dv + r * cols;
    const float m = sh::mean_of(
        sh::row_reduce_host(
            plan, cols, 0.0f, [&](float a, int64_t j) { return sh::add(a, ld(xr[j])); }, sum),
        cols);
    const float inv = sh::inv_std_of(
        sh::row_reduce_host(
            plan, cols, 0.0f, [&](float a, int64_t j) { return sh::add_sq_dev(a, ld(xr[j]), m); },
            sum),
        cols, eps);
    stats[2 * r] = m;
    stats[2 * r + 1] = inv;
    auto g = [&](int64_t j) { return sh::mul(ld(dr[j]), sv[j]); };
    auto xhat = [&](int64_t j) { return sh::layer_norm_xhat(ld(xr[j]), m, inv); };
    const float mg = sh::mean_of(
        sh::row_reduce_host(
            plan, cols, 0.0f, [&](float a, int64_t j) { return sh::add(a, g(j)); }, sum),
        cols);
    const float mgx = sh::mean_of(
        sh::row_reduce_host(
            plan, cols, 0.0f,
            [&](float a, int64_t j) { return sh::add(a, sh::mul(g(j), xhat(j))); }, sum),
        cols);
    for (int64_t j = 0; j < cols; ++j) {
      const T want = sh::Elem<T>::store(sh::layer_norm_grad_value(g(j), xhat(j), mg, mgx, inv));
      ASSERT_EQ(std::memcmp(&got[0].data<T>()[r * cols + j], &want, sizeof(T)), 0)
          << what << " dX " << r << "," << j;
    }
  }
  const int64_t chunk_rows = sh::layer_norm_grad_chunk_rows(rows);
  for (int64_t j = 0; j < cols; ++j) {
    float ts = 0.0f, tb = 0.0f;
    for (int64_t c = 0; c < sh::layer_norm_grad_chunks(rows); ++c) {
      float s = 0.0f, b = 0.0f;
      for (int64_t r = c * chunk_rows; r < std::min(rows, (c + 1) * chunk_rows); ++r) {
        const float d = ld(dv[r * cols + j]);
        s = sh::add(s, sh::mul(d, sh::layer_norm_xhat(ld(xv[r * cols + j]), stats[2 * r],
                                                      stats[2 * r + 1])));
        b = sh::add(b, d);
      }
      ts = sh::add(ts, s);
      tb = sh::add(tb, b);
    }
    ASSERT_EQ(std::memcmp(&got[1].data<float>()[j], &ts, 4), 0) << what << " dScale " << j;
    ASSERT_EQ(std::memcmp(&got[2].data<float>()[j], &tb, 4), 0) << what << " dB " << j;
  }
}

TEST(LayerNormGrad, IsTheKernelsOrderBitForBit) {
  uint32_t seed = 600;
  for (const Case& c : kCases) {
    for (DType t : {DType::kFloat32, DType::kBFloat16}) {
      const int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.shape.size()) : c.axis;
      const Dims norm(c.shape.begin() + axis, c.shape.end());
      const std::string what = std::string(dtype_name(t)) + " shape of " +
                               std::to_string(count(c.shape)) + " axis " + std::to_string(c.axis);
      const Tensor x = random(t, c.shape, seed++, -3, 5);
      const Tensor dy = random(t, c.shape, seed++);
      const Tensor scale = random(DType::kFloat32, norm, seed++, 0.5, 2);
      const auto got = run_grad(dy, x, scale, c.axis, 1e-3f);
      if (t == DType::kFloat32) {
        expect_kernel_order<float>(dy, x, scale, count(norm), 1e-3f, got, what);
      } else {
        expect_kernel_order<BFloat16>(dy, x, scale, count(norm), 1e-3f, got, what);
      }
    }
  }
}

TEST(LayerNormGrad, RefusesMismatchedOperands) {
  const Tensor x = random(DType::kFloat32, {2, 3}, 1), scale = random(DType::kFloat32, {3}, 2);
  EXPECT_NE(
      optest::run_error("LayerNormalizationGrad", {random(DType::kFloat32, {3, 2}, 3), x, scale},
                        {attr_i("axis", 1)}, 3, 1, "ampc")
          .find("does not match X"),
      std::string::npos);
  EXPECT_NE(
      optest::run_error("LayerNormalizationGrad",
                        {random(DType::kFloat32, {2, 3}, 3), x, random(DType::kFloat32, {2}, 4)},
                        {attr_i("axis", 1)}, 3, 1, "ampc")
          .find("one float per normalised element"),
      std::string::npos);
}

}  // namespace
}  // namespace ampc::rt::cpu
