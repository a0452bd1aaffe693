// The generic row-wise ops (kernels/shared/row_ops.h): the CPU ops of LpNormalization and
// InstanceNormalization against float64 references written out here (y = x / ||x||_p along one
// axis; the (n, c) planes normalised, scaled and shifted per channel), every op of the list in
// f16 / bf16 against its f32 result on the same (exactly widened) values rounded once, in
// place and out of place, and the CPU op refusing what the ONNX definition does not allow.
// PyTorch checks the op and its gradient in a model (tests/oracle/model_oracle.py); the
// CUDA kernel is compared with the twin in tests/gpu/kernels_rowwise_gpu_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/half.h"
#include "kernels/shared/row_ops.h"
#include "kernels/twin/row_op.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::rt::cpu::optest {
namespace {

namespace sh = kernels::shared;

struct Case {
  std::vector<int64_t> shape;
  int64_t axis;
};
// Warp rows (33), block rows with and without 4-element chunks (1024, 1030; 20000: 512
// threads), columns (inner > 1), a row of one element.
const Case kCases[] = {{{7, 33}, -1},   {{5, 1024}, 1}, {{4, 1030}, -1}, {{2, 20000}, 1},
                       {{2, 17, 5}, 1}, {{6, 3, 4}, 0}, {{3, 1}, -1},    {{3, 4, 40}, 2}};

struct Rows {
  int64_t outer = 1, n = 1, inner = 1;
};
Rows rows_of(const std::vector<int64_t>& shape, int64_t axis) {
  const auto rank = static_cast<int64_t>(shape.size());
  if (axis < 0) axis += rank;
  Rows r;
  for (int64_t i = 0; i < axis; ++i) r.outer *= shape[i];
  r.n = shape[axis];
  for (int64_t i = axis + 1; i < rank; ++i) r.inner *= shape[i];
  return r;
}

// x / ||x||_p along the middle axis of [outer, n, inner], in double.
std::vector<double> lp_reference(const std::vector<double>& x, const Rows& r, int p) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < r.outer; ++o) {
    for (int64_t i = 0; i < r.inner; ++i) {
      double s = 0;
      for (int64_t j = 0; j < r.n; ++j) {
        const double v = x[(o * r.n + j) * r.inner + i];
        s += p == 1 ? std::abs(v) : v * v;
      }
      if (p == 2) s = std::sqrt(s);
      for (int64_t j = 0; j < r.n; ++j) {
        const int64_t k = (o * r.n + j) * r.inner + i;
        y[k] = x[k] / s;
      }
    }
  }
  return y;
}

int64_t count_of(const std::vector<int64_t>& shape) {
  int64_t c = 1;
  for (int64_t d : shape) c *= d;
  return c;
}

TEST(RowOps, LpNormalizationMatchesAFloat64Reference) {
  for (const Case& c : kCases) {
    const Rows r = rows_of(c.shape, c.axis);
    const std::vector<double> v = pseudo_random(static_cast<size_t>(count_of(c.shape)), 5);
    for (int p : {1, 2}) {
      const std::vector<double> want = lp_reference(v, r, p);
      for (DType dtype : {DType::kFloat64, DType::kFloat32}) {
        const Tensor x = make(dtype, c.shape, v);
        const Tensor y =
            run("LpNormalization", {x}, {attr_i("axis", c.axis), attr_i("p", p)}, 1, 1)[0];
        ASSERT_EQ(y.dtype(), dtype);
        SCOPED_TRACE(x.type_str() + " axis " + std::to_string(c.axis) + " p " + std::to_string(p));
        // f32: the sum of n rounded terms and one division (n up to 20000).
        const double tol = dtype == DType::kFloat64 ? 1e-14 : 2e-6;
        expect_close(values(y), want, tol);
      }
    }
  }
}

// Per-channel operands for the ops that have them (InstanceNormalization's scale and bias):
// 3 channels of f32 values.
struct Operands {
  Tensor first = make(DType::kFloat32, {3}, {0.5, -1.25, 2.0});
  Tensor second = make(DType::kFloat32, {3}, {0.25, 0.0, -0.75});
  sh::RowOperands ops;
  Operands() {
    ops.channels = 3;
    ops.data[0] = first.raw();
    ops.data[1] = second.raw();
  }
};

TEST(RowOps, SixteenBitResultsAreTheFp32ResultRoundedOnce) {
  const Operands operands;
  for (sh::RowOp op : sh::kRowOps) {
    for (const Case& c : kCases) {
      const Rows r = rows_of(c.shape, c.axis);
      const size_t count = static_cast<size_t>(count_of(c.shape));
      for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
        // Values the 16-bit type holds exactly, so the fp32 run sees the same inputs.
        const Tensor x = make(dtype, c.shape, pseudo_random(count, 7));
        const std::vector<double> exact = values(x);
        const Tensor x32 = make(DType::kFloat32, c.shape, exact);
        for (const sh::RowArgs args : {sh::RowArgs{1e-5f, 1}, sh::RowArgs{1e-3f, 2}}) {
          Tensor y32(DType::kFloat32, c.shape), y(dtype, c.shape);
          kernels::twin::row_op(op, DType::kFloat32, x32.raw(), y32.raw(), r.outer, r.n, r.inner,
                                args, operands.ops);
          kernels::twin::row_op(op, dtype, x.raw(), y.raw(), r.outer, r.n, r.inner, args,
                                operands.ops);
          const float* f = y32.data<float>();
          const auto* bits = static_cast<const uint16_t*>(y.raw());
          int failures = 0;
          for (size_t k = 0; k < count && failures < 3; ++k) {
            const uint16_t want =
                dtype == DType::kFloat16 ? float_to_half(f[k]).bits : float_to_bf16(f[k]).bits;
            if (bits[k] != want) {
              ++failures;
              ADD_FAILURE() << dtype_name(dtype) << " op " << static_cast<int>(op) << " p "
                            << args.p << " element " << k << ": " << bits[k] << " vs " << want;
            }
          }
          // In place (y aliases x): the same bits.
          Tensor in_place = x;
          kernels::twin::row_op(op, dtype, in_place.raw(), in_place.raw(), r.outer, r.n, r.inner,
                                args, operands.ops);
          EXPECT_EQ(std::memcmp(in_place.raw(), y.raw(), count * 2), 0) << "in place";
        }
      }
    }
  }
}

// InstanceNormalization over the (n, c) planes in double: mean, biased variance, scale and
// bias of the plane's channel.
std::vector<double> instance_norm_reference(const std::vector<double>& x,
                                            const std::vector<int64_t>& shape,
                                            const std::vector<double>& scale,
                                            const std::vector<double>& bias, double eps) {
  const int64_t planes = shape[0] * shape[1], size = count_of(shape) / planes;
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < planes; ++r) {
    const double* v = &x[r * size];
    double mean = 0, var = 0;
    for (int64_t j = 0; j < size; ++j) mean += v[j];
    mean /= static_cast<double>(size);
    for (int64_t j = 0; j < size; ++j) var += (v[j] - mean) * (v[j] - mean);
    var /= static_cast<double>(size);
    const int64_t c = r % shape[1];
    for (int64_t j = 0; j < size; ++j)
      y[r * size + j] = (v[j] - mean) / std::sqrt(var + eps) * scale[c] + bias[c];
  }
  return y;
}

TEST(RowOps, InstanceNormalizationMatchesAFloat64Reference) {
  const std::vector<std::vector<int64_t>> shapes = {
      {2, 3, 5}, {4, 6, 32, 32}, {1, 2, 3, 4, 5}, {2, 2, 3000}};
  for (const auto& shape : shapes) {
    const int64_t c = shape[1];
    const std::vector<double> v = pseudo_random(static_cast<size_t>(count_of(shape)), 41);
    std::vector<double> scale = pseudo_random(static_cast<size_t>(c), 43);
    const std::vector<double> bias = pseudo_random(static_cast<size_t>(c), 47);
    for (double& s : scale) s += 1.5;  // away from 0: the output's scale
    const double eps = 1e-3f;          // the attribute is a float
    const std::vector<double> want = instance_norm_reference(v, shape, scale, bias, eps);
    // x and the per-channel operands in one type, and 16-bit x with f32 operands (autocast's
    // fp32 parameters beside a 16-bit activation).
    for (const auto& [xt, pt] :
         {std::pair{DType::kFloat64, DType::kFloat64}, std::pair{DType::kFloat32, DType::kFloat32},
          std::pair{DType::kFloat16, DType::kFloat32},
          std::pair{DType::kBFloat16, DType::kFloat32}}) {
      const Tensor x = make(xt, shape, v);
      const Tensor y = run("InstanceNormalization", {x, make(pt, {c}, scale), make(pt, {c}, bias)},
                           {attr_f("epsilon", 1e-3f)}, 1, 6)[0];
      ASSERT_EQ(y.dtype(), xt);
      SCOPED_TRACE(x.type_str());
      // 16-bit: the reference of the stored (rounded) inputs, then one rounding of the result.
      const std::vector<double> ref =
          xt == DType::kFloat16 || xt == DType::kBFloat16
              ? instance_norm_reference(values(x), shape, scale, bias, eps)
              : want;
      const double tol = xt == DType::kFloat64   ? 1e-12
                         : xt == DType::kFloat32 ? 2e-5
                         : xt == DType::kFloat16 ? 4e-3
                                                 : 3e-2;
      expect_close(values(y), ref, tol);
    }
  }
}

TEST(RowOps, InstanceNormalizationRefusesOperandsOfAnotherLength) {
  const Tensor x = make(DType::kFloat32, {1, 2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor three = make(DType::kFloat32, {3}, {1, 1, 1});
  EXPECT_NE(run_error("InstanceNormalization", {x, three, three}, {}, 1, 6)
                .find("does not have 2 elements (one per channel)"),
            std::string::npos);
}

TEST(RowOps, LpNormalizationOfAZeroRowIsNan) {
  const Tensor x = make(DType::kFloat32, {2, 3}, {0, 0, 0, 1, 2, 2});
  const std::vector<double> y = values(run("LpNormalization", {x}, {}, 1, 1)[0]);
  for (int j = 0; j < 3; ++j) EXPECT_TRUE(std::isnan(y[j])) << j;
  expect_close({y[3], y[4], y[5]}, {1.0 / 3, 2.0 / 3, 2.0 / 3}, 1e-7);
}

TEST(RowOps, LpNormalizationRefusesOtherOrdersAndIntegers) {
  const Tensor x = make(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_NE(run_error("LpNormalization", {x}, {attr_i("p", 3)}, 1, 1)
                .find("attribute 'p' is 3; the ONNX definition allows 1 and 2"),
            std::string::npos);
  const Tensor xi = make(DType::kInt32, {2, 3}, {1, 2, 3, 4, 5, 6});
  const std::string integer = run_error("LpNormalization", {xi}, {}, 1, 1);
  EXPECT_NE(integer.find("i32"), std::string::npos) << integer;
}

}  // namespace
}  // namespace ampc::rt::cpu::optest
