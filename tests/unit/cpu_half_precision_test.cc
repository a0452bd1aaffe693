// fp16/bf16 emulation on the CPU, elementwise and data-movement ops: twin tests (16-bit run
// == fp32 run on the upcast inputs, rounded once), Cast's round-to-nearest-even by hand, and
// refusals of 16-bit inputs an op does not support.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "tests/unit/cpu_half_precision_test_twin.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::rt::cpu::halftest {
namespace {

using optest::attr_f;
using optest::attr_i;
using optest::attr_ints;
using optest::attr_s;

TEST(CpuHalfTwin, UnaryMath) {
  for (const char* op : {"Neg", "Relu", "Erf", "Tanh", "Sigmoid", "Exp", "Abs", "Identity"})
    expect_twin({op, {low({5, 33}, -4, 4)}});
  for (const char* op : {"Sqrt", "Log", "Reciprocal"}) expect_twin({op, {low({5, 33}, 0.01, 9)}});
  // Over a block of the bf16 rounding (256 values) and a partial last group of 16 lanes.
  for (const char* op : {"Relu", "Exp"}) expect_twin({op, {low({2, 531}, -4, 4)}});
  expect_twin({"LeakyRelu", {low({70})}, {attr_f("alpha", 0.1f)}});
  expect_twin({"Elu", {low({70})}, {attr_f("alpha", 0.7f)}});
}

// The activations whose ONNX schemas lack bfloat16 and the ampc forms autocast writes for
// them (ops/ampc_forms.h), the forms with ONNX's attributes given.
TEST(CpuHalfTwin, ActivationsAndTheirAmpcForms) {
  for (const char* op :
       {"HardSigmoid", "HardSwish", "Elu", "Celu", "Selu", "Softsign", "ThresholdedRelu"}) {
    expect_twin({op, {low({2, 531}, -5, 5)}});
    expect_twin({op, {low({2, 531}, -5, 5)}, {}, 1, 1, "ampc"});
  }
  expect_twin({"HardSigmoid",
               {low({70}, -5, 5)},
               {attr_f("alpha", 0.25f), attr_f("beta", 0.4f)},
               1,
               1,
               "ampc"});
  expect_twin({"Celu", {low({70}, -5, 5)}, {attr_f("alpha", 1.5f)}, 1, 1, "ampc"});
  expect_twin(
      {"Selu", {low({70}, -5, 5)}, {attr_f("alpha", 1.5f), attr_f("gamma", 1.1f)}, 1, 1, "ampc"});
  expect_twin({"ThresholdedRelu", {low({70}, -5, 5)}, {attr_f("alpha", 0.5f)}, 1, 1, "ampc"});
}

TEST(CpuHalfTwin, BinaryArithmeticWithBroadcasting) {
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    expect_twin({op, {low({3, 4, 5}), low({4, 5}, 0.5, 3)}});
    expect_twin({op, {low({}), low({2, 3}, 0.5, 3)}});
    expect_twin({op, {low({4, 1}), low({1, 6}, -3, -0.5)}});
    expect_twin({op, {low({40000}), low({40000}, 0.5, 3)}});  // large: threaded path
    expect_twin({op, {low({3, 301}), low({301}, 0.5, 3)}});   // rows over a rounding block
  }
  expect_twin({"Pow", {low({4, 6}, 0.1, 4), low({6}, -2, 2)}});
  expect_twin({"Pow", {low({4, 6}, 0.1, 4), low_values({}, {2.0})}});
  expect_twin({"Sum", {low({3, 4}), low({4}), low({3, 1})}});
}

TEST(CpuHalfTwin, ComparisonsWhereClip) {
  for (const char* op : {"Equal", "Greater", "Less"})
    expect_twin(
        {op, {low_values({6}, {1, 2, -3, 0.5, 7, -0.0}), low_values({6}, {1, 3, -3, 0.25, 8, 0})}});
  expect_twin({"Where", {boolean({2, 3}, {1, 0, 1, 0, 0, 1}), low({2, 3}), low({1, 3})}});
  expect_twin({"Clip", {low({40}), low_values({}, {-0.5}), low_values({}, {0.75})}, {}, 1, 13});
}

TEST(CpuHalfTwin, Dropout) {
  // Training with a seed: the same mask in both runs; kept values scaled in fp32, rounded once.
  expect_twin(
      {"Dropout", {low({8, 9}), f32({}, 0.3, 0.3), boolean({}, {1})}, {attr_i("seed", 7)}, 2, 13});
  expect_twin({"Dropout", {low({8, 9})}, {}, 2, 13});  // inference: identity
}

TEST(CpuHalfTwin, ShapeOps) {
  expect_twin({"Reshape", {low({2, 3, 4}), i64({2}, {4, -1})}, {}, 1, 14});
  expect_twin({"Flatten", {low({2, 3, 4, 5})}, {attr_i("axis", 2)}});
  expect_twin({"Squeeze", {low({2, 1, 3}), i64({1}, {1})}, {}, 1, 13});
  expect_twin({"Unsqueeze", {low({2, 3}), i64({1}, {0})}, {}, 1, 13});
  expect_twin({"Transpose", {low({2, 3, 4})}, {attr_ints("perm", {2, 0, 1})}});
  expect_twin({"Expand", {low({3, 1}), i64({3}, {2, 3, 4})}});
  expect_twin({"Tile", {low({2, 3}), i64({2}, {2, 1})}});
  expect_twin({"Pad", {low({2, 3}), i64({4}, {0, 1, 1, 0})}, {attr_s("mode", "constant")}, 1, 13});
}

TEST(CpuHalfTwin, ConcatSliceSplit) {
  expect_twin({"Concat", {low({2, 3}), low({2, 5})}, {attr_i("axis", 1)}});
  expect_twin(
      {"Slice",
       {low({5, 6}), i64({2}, {1, 0}), i64({2}, {4, 6}), i64({2}, {0, 1}), i64({2}, {1, 2})},
       {},
       1,
       13});
  expect_twin({"Split", {low({6, 4}), i64({2}, {2, 4})}, {attr_i("axis", 0)}, 2, 13});
}

TEST(CpuHalfTwin, GatherAndScatter) {
  expect_twin({"Gather", {low({5, 4}), i64({2, 3}, {0, 4, 2, 2, -1, 0})}, {attr_i("axis", 0)}});
  expect_twin({"Gather", {low({3, 5}), i64({3}, {1, 1, 4})}, {attr_i("axis", 1)}});
  // Gather's gradient (rules_index.cc): ScatterND with reduction add into zeros; repeated
  // indices accumulate in fp32 and round once. Row 0 (fp16: 2048 + 1 is a tie) and row 1
  // (bf16: 256 + 1 is a tie) round differently when every addition rounds.
  const auto add = attr_s("reduction", "add");
  const std::vector<double> ties = {2048, 1, 1, 1, 256, 1, 1, 1};
  expect_twin(
      {"ScatterND",
       {low_values({2}, {0, 0}), i64({8, 1}, {0, 0, 0, 0, 1, 1, 1, 1}), low_values({8}, ties)},
       {add},
       1,
       16});
  expect_twin({"ScatterElements",
               {low_values({2}, {0, 0}), i64({8}, {0, 0, 0, 0, 1, 1, 1, 1}), low_values({8}, ties)},
               {add},
               1,
               16});
  expect_twin({"ScatterND",
               {low_values({5, 3}, std::vector<double>(15, 0.0)), i64({6, 1}, {0, 2, 0, 0, 4, 0}),
                low({6, 3}, -1000, 1000)},
               {add},
               1,
               16});
  expect_twin({"ScatterND", {low({5, 3}), i64({2, 1}, {3, 1}), low({2, 3})}, {}, 1, 16});
  expect_twin(
      {"ScatterElements", {low({6}), i64({2}, {5, 0}), low({2})}, {attr_i("axis", 0)}, 1, 16});
}

TEST(CpuHalfTwin, ReductionsSoftmaxLoss) {
  // DENY ops: autocast keeps them in fp32, but 16-bit inputs still follow the model.
  expect_twin({"ReduceSum", {low({4, 30, 5}), i64({1}, {1})}, {attr_i("keepdims", 1)}, 1, 13});
  expect_twin({"ReduceMean", {low({4, 30, 5})}, {attr_ints("axes", {0, 2})}, 1, 13});
  expect_twin({"Softmax", {low({4, 30}, -8, 8)}, {attr_i("axis", -1)}, 1, 13});
  expect_twin({"LogSoftmax", {low({4, 30}, -8, 8)}, {attr_i("axis", -1)}, 1, 13});
  expect_twin({"SoftmaxCrossEntropyLoss", {low({4, 5}), i64({4}, {0, 4, 2, 2})}, {}, 1, 13});
}

// Cast: one RNE from the source value, NaN/Inf preserved, fp16 overflow to Inf.
float cast_scalar(DType from, double v, DType to) {
  const Tensor x = tensor_of(from, {}, {v});
  const Tensor y = run_op("Cast", "", {x}, {attr_i("to", static_cast<int64_t>(to))}, 1, 19)[0];
  EXPECT_EQ(y.dtype(), to);
  return static_cast<float>(optest::values(y)[0]);
}

TEST(CpuHalfCast, RoundToNearestEvenByHand) {
  const DType f16 = DType::kFloat16, bf16 = DType::kBFloat16, f32 = DType::kFloat32,
              f64 = DType::kFloat64;
  EXPECT_EQ(cast_scalar(f32, 1 + 0x1p-11, f16), 1.0f);                    // tie -> even (down)
  EXPECT_EQ(cast_scalar(f32, 1 + 3 * 0x1p-11, f16), 1 + 0x1p-9f);         // tie -> even (up)
  EXPECT_EQ(cast_scalar(f32, 1 + 0x1p-11 + 0x1p-20, f16), 1 + 0x1p-10f);  // above the tie
  EXPECT_EQ(cast_scalar(f32, 65519.0, f16), 65504.0f);                    // below the midpoint
  EXPECT_TRUE(std::isinf(cast_scalar(f32, 65520.0, f16)));                // overflow -> inf
  EXPECT_EQ(cast_scalar(f32, -1e6, f16), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(cast_scalar(f32, 0x1p-24, f16), 0x1p-24f);      // smallest subnormal, exact
  EXPECT_EQ(cast_scalar(f32, 0x1p-25, f16), 0.0f);          // tie between 0 and 2^-24 -> 0
  EXPECT_EQ(cast_scalar(f32, 3 * 0x1p-26, f16), 0x1p-24f);  // above the tie
  EXPECT_EQ(cast_scalar(f32, 3 * 0x1p-25, f16), 0x1p-23f);  // tie 1.5 ulp -> even (2 ulp)
  EXPECT_EQ(cast_scalar(f32, 1 + 0x1p-8, bf16), 1.0f);      // tie -> even
  EXPECT_EQ(cast_scalar(f32, 1 + 3 * 0x1p-8, bf16), 1 + 0x1p-6f);
  EXPECT_EQ(cast_scalar(f32, 0x1p-133, bf16), 0x1p-133f);   // bf16 subnormal, exact
  EXPECT_TRUE(std::isinf(cast_scalar(f32, 3.4e38, bf16)));  // rounds past bf16's max
  EXPECT_TRUE(std::isnan(cast_scalar(f32, std::nan(""), bf16)));
  EXPECT_TRUE(std::isnan(cast_scalar(f32, std::nan(""), f16)));
  EXPECT_TRUE(std::isnan(cast_scalar(bf16, std::nan(""), f16)));
  EXPECT_EQ(cast_scalar(f16, -INFINITY, bf16), -INFINITY);
  EXPECT_EQ(cast_scalar(bf16, INFINITY, f16), INFINITY);
  // fp64 -> fp16 rounds once from the double: 1 + 2^-11 + 2^-40 is above the tie. (Going
  // through fp32 with RNE would give the tie 1 + 2^-11 and then 1.)
  EXPECT_EQ(cast_scalar(f64, 1 + 0x1p-11 + 0x1p-40, f16), 1 + 0x1p-10f);
  EXPECT_EQ(cast_scalar(f64, 1 + 0x1p-8 + 0x1p-40, bf16), 1 + 0x1p-7f);
  // bf16 -> fp16: 1 + 2^-7 exact; 2^20 overflows fp16; fp16 -> bf16 rounds 1 + 2^-10 to 1.
  EXPECT_EQ(cast_scalar(bf16, 1 + 0x1p-7, f16), 1 + 0x1p-7f);
  EXPECT_TRUE(std::isinf(cast_scalar(bf16, 0x1p20, f16)));
  EXPECT_EQ(cast_scalar(f16, 1 + 0x1p-10, bf16), 1.0f);
  EXPECT_EQ(cast_scalar(f16, 1 + 0x1p-10, f64), 1 + 0x1p-10f);
  EXPECT_EQ(cast_scalar(bf16, -3.140625, f32), -3.140625f);
}

TEST(CpuHalfCast, TwinOfWideningAndNarrowing) {
  // 16 -> fp32 -> 16 is the identity on every non-NaN bit pattern.
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    Tensor all(t, {65536});
    for (int i = 0; i < 65536; ++i) {
      const uint16_t b = static_cast<uint16_t>(i);
      std::memcpy(static_cast<char*>(all.raw()) + 2 * i, &b, 2);
    }
    const Tensor wide = run_op("Cast", "", {all}, {attr_i("to", 1)}, 1, 19)[0];
    const Tensor back =
        run_op("Cast", "", {wide}, {attr_i("to", static_cast<int64_t>(t))}, 1, 19)[0];
    for (int i = 0; i < 65536; ++i) {
      if (std::isnan(wide.data<float>()[i])) continue;
      ASSERT_EQ(bits16(back, i), i) << dtype_name(t);
    }
  }
}

TEST(CpuHalfRefusals, UnsupportedDtypeIsAClearError) {
  const Tensor h = tensor_of(DType::kFloat16, {2}, {1, 2});
  const Tensor b = tensor_of(DType::kBFloat16, {2}, {1, 2});
  for (const Tensor* t : {&h, &b}) {
    for (const char* op : {"Not", "BitShift", "And", "MatMulInteger"}) {
      try {
        run_op(op, "", {*t, *t}, {attr_s("direction", "LEFT")}, 1, 18);
        ADD_FAILURE() << op << " accepted " << t->type_str();
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("is not supported by the CPU backend"),
                  std::string::npos)
            << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace ampc::rt::cpu::halftest
