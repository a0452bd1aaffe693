// fp16/bf16 emulation on the CPU, GEMM, convolution, pooling and normalisation with their
// gradient ops: twin tests. 16-bit operands are widened exactly and the same fp32 kernel
// (OpenBLAS sgemm, im2col) runs in both twins, so the summation order is the same and the
// results are bit-identical after the one rounding.
#include <gtest/gtest.h>

#include "tests/unit/cpu_half_precision_test_twin.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::rt::cpu::halftest {
namespace {

using optest::attr_f;
using optest::attr_i;
using optest::attr_ints;

TEST(CpuHalfTwin, MatMul) {
  expect_twin({"MatMul", {low({8, 16}), low({16, 12})}});
  expect_twin({"MatMul", {low({3, 5, 7}), low({7, 4})}});         // stacked A
  expect_twin({"MatMul", {low({2, 1, 4, 6}), low({3, 6, 5})}});   // broadcast batch
  expect_twin({"MatMul", {low({7}), low({7, 3})}});               // vector x matrix
  expect_twin({"MatMul", {low({4, 7}), low({7})}});               // matrix x vector
  expect_twin({"MatMul", {low({2, 64, 96}), low({2, 96, 80})}});  // large: threaded BLAS
  expect_twin({"MatMul", {low({0, 5}), low({5, 3})}});            // empty
}

TEST(CpuHalfTwin, Einsum) {
  expect_twin({"Einsum", {low({6, 9}), low({9, 4})}, {optest::attr_s("equation", "ij,jk->ik")}});
  expect_twin(
      {"Einsum", {low({2, 3, 5}), low({2, 5, 4})}, {optest::attr_s("equation", "bij,bjk->bik")}});
}

TEST(CpuHalfTwin, GemmTransposesAlphaBetaBias) {
  const int64_t m = 6, n = 5, k = 9;
  const std::vector<std::vector<int64_t>> biases = {{}, {n}, {m, 1}, {m, n}, {1, n}};
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      const Arg a = low(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k});
      const Arg b = low(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
      for (const auto& c : biases) {
        SCOPED_TRACE("transA " + std::to_string(ta) + " transB " + std::to_string(tb) +
                     " bias rank " + std::to_string(c.size()));
        expect_twin({"Gemm",
                     {a, b, low(c)},
                     {attr_i("transA", ta), attr_i("transB", tb), attr_f("alpha", 0.5f),
                      attr_f("beta", 1.5f)}});
        expect_twin({"Gemm", {a, b, low(c)}, {attr_i("transA", ta), attr_i("transB", tb)}});
      }
      expect_twin({"Gemm", {a, b}, {attr_i("transA", ta), attr_i("transB", tb)}});  // no C
    }
  }
  expect_twin({"Gemm", {low({128, 200}), low({96, 200}), low({96})}, {attr_i("transB", 1)}});
}

// A grouped, strided, padded, dilated 2-D convolution and its gradient.
std::vector<plan::Attribute> conv_attrs() {
  return {attr_i("group", 2), attr_ints("strides", {2, 1}), attr_ints("pads", {1, 0, 1, 1}),
          attr_ints("dilations", {1, 2})};
}

TEST(CpuHalfTwin, ConvAndConvGrad) {
  expect_twin({"Conv", {low({2, 4, 7, 7}), low({6, 2, 3, 3}), low({6})}, conv_attrs()});
  expect_twin({"Conv", {low({2, 3, 9, 9}), low({8, 3, 3, 3})}, {attr_ints("pads", {1, 1, 1, 1})}});
  expect_twin({"Conv", {low({1, 2, 11}), low({3, 2, 4})}, {attr_ints("strides", {3})}});  // 1-D
  expect_twin({"ConvTranspose",
               {low({1, 4, 3, 3}), low({4, 3, 3, 3}), low({3})},
               {attr_ints("strides", {2, 2}), attr_ints("pads", {1, 1, 1, 1})}});
  expect_twin({"ConvTranspose",  // the bf16 form autocast writes
               {low({2, 4, 3, 3}), low({4, 1, 3, 2}), low({2})},
               {attr_i("group", 2), attr_ints("strides", {2, 1}), attr_ints("pads", {1, 0, 1, 1}),
                attr_ints("output_padding", {1, 0})},
               1,
               1,
               "ampc"});
  expect_twin({"ConvGrad",
               {low({2, 6, 4, 4}), low({2, 4, 7, 7}), low({6, 2, 3, 3})},
               conv_attrs(),
               3,
               1,
               "ampc"});
  expect_twin({"ConvGrad",
               {low({2, 8, 9, 9}), low({2, 3, 9, 9}), low({8, 3, 3, 3})},
               {attr_ints("pads", {1, 1, 1, 1})},
               3,
               1,
               "ampc"});
}

std::vector<plan::Attribute> pool_attrs() {
  return {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 2}),
          attr_ints("pads", {1, 1, 1, 1})};
}

TEST(CpuHalfTwin, PoolingAndPoolingGradients) {
  expect_twin({"MaxPool", {low({2, 3, 8, 8})}, pool_attrs(), 2, 12});
  expect_twin({"MaxPool", {low({2, 3, 8, 8})}, pool_attrs(), 2, 1, "ampc"});  // bf16 allowed
  expect_twin({"AveragePool", {low({2, 3, 8, 8})}, pool_attrs(), 1, 1, "ampc"});
  expect_twin({"GlobalAveragePool", {low({2, 3, 5, 5})}, {}, 1, 1, "ampc"});
  auto with_pad = pool_attrs();
  with_pad.push_back(attr_i("count_include_pad", 1));
  expect_twin({"AveragePool", {low({2, 3, 8, 8})}, pool_attrs(), 1, 19});
  expect_twin({"AveragePool", {low({2, 3, 8, 8})}, with_pad, 1, 19});
  expect_twin({"GlobalAveragePool", {low({2, 3, 5, 5})}});
  expect_twin({"GlobalMaxPool", {low({2, 3, 5, 5})}});
  expect_twin({"MaxPoolGrad", {low({2, 3, 4, 4}), low({2, 3, 8, 8})}, pool_attrs(), 1, 1, "ampc"});
  expect_twin(
      {"AveragePoolGrad", {low({2, 3, 4, 4}), low({2, 3, 8, 8})}, pool_attrs(), 1, 1, "ampc"});
  expect_twin({"AveragePoolGrad", {low({2, 3, 4, 4}), low({2, 3, 8, 8})}, with_pad, 1, 1, "ampc"});
}

TEST(CpuHalfTwin, BatchNormalizationMixedTypes) {
  // Opset 15: X (T) in 16-bit, scale/bias (T1) and mean/var (T2) in fp32, as autocast leaves
  // them; training mode returns fp32 running statistics.
  const std::vector<Arg> mixed = {low({4, 3, 5, 5}), f32({3}, 0.5, 2), f32({3}), f32({3}),
                                  f32({3}, 0.5, 3)};
  expect_twin(
      {"BatchNormalization", mixed, {attr_i("training_mode", 1), attr_f("momentum", 0.8f)}, 3, 15});
  expect_twin({"BatchNormalization", mixed, {attr_f("epsilon", 1e-3f)}, 1, 15});
  // Everything 16-bit (T = T1 = T2).
  const std::vector<Arg> all_low = {low({4, 3, 6}), low({3}, 0.5, 2), low({3}), low({3}),
                                    low({3}, 0.5, 3)};
  expect_twin({"BatchNormalization", all_low, {attr_i("training_mode", 1)}, 3, 15});
  expect_twin({"BatchNormalization", all_low, {}, 1, 15});
}

TEST(CpuHalfTwin, BatchNormalizationGrad) {
  // The backward of training mode: dY and X 16-bit with an fp32 scale (dScale and dB fp32, the
  // fp32 run's bytes), and everything 16-bit.
  expect_twin({"BatchNormalizationGrad",
               {low({4, 3, 5, 5}), low({4, 3, 5, 5}), f32({3}, 0.5, 2)},
               {attr_f("epsilon", 1e-3f)},
               3,
               1,
               "ampc"});
  expect_twin({"BatchNormalizationGrad",
               {low({4, 3, 6}), low({4, 3, 6}), low({3}, 0.5, 2)},
               {},
               3,
               1,
               "ampc"});
}

TEST(CpuHalfTwin, LayerNormalization) {
  expect_twin({"LayerNormalization", {low({4, 7, 16}), low({16}), low({16})}, {}, 3, 17});
  expect_twin({"LayerNormalization", {low({4, 7, 16}), low({7, 16})}, {attr_i("axis", 1)}, 1, 17});
}

}  // namespace
}  // namespace ampc::rt::cpu::halftest
