// CPU elementwise operators called through the registry with hand-built plan steps, checked
// against values computed by hand (broadcasting, integer semantics, 16-bit rounding).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runtime/cpu/op_registry.h"
#include "tests/unit/step_test_helpers.h"

namespace ampc::rt::cpu {
namespace {

using testing::run_op;
using testing::set_float;
using testing::set_int;
using testing::set_string;

template <typename T>
Tensor make(std::vector<int64_t> shape, const std::vector<T>& values) {
  Tensor t(dtype_of<T>(), std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

template <typename T>
std::vector<T> values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

Half h(float f) {
  return float_to_half(f);
}

TEST(CpuElementwise, AddBroadcastsRowAndColumn) {
  const Tensor a = make<float>({2, 1}, {10, 20});
  const Tensor b = make<float>({3}, {1, 2, 3});
  const auto y = run_op("Add", {&a, &b});
  EXPECT_EQ(y[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{11, 12, 13, 21, 22, 23}));
}

TEST(CpuElementwise, SubBroadcastsScalarOnTheLeftAndMiddleAxis) {
  const Tensor a = make<int32_t>({}, {100});
  const Tensor b = make<int32_t>({2, 1, 2}, {1, 2, 3, 4});
  EXPECT_EQ(values<int32_t>(run_op("Sub", {&a, &b})[0]), (std::vector<int32_t>{99, 98, 97, 96}));
  const Tensor c = make<int64_t>({2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  const Tensor d = make<int64_t>({3, 1}, {100, 200, 300});
  EXPECT_EQ(values<int64_t>(run_op("Add", {&c, &d})[0]),
            (std::vector<int64_t>{100, 101, 202, 203, 304, 305, 106, 107, 208, 209, 310, 311}));
}

TEST(CpuElementwise, LegacyBroadcastBeforeOpset7LinesUpAtTheAxis) {
  const Tensor a = make<float>({2, 3, 2}, {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1});
  const Tensor b = make<float>({3}, {10, 20, 30});
  const auto y = run_op(
      "Add", {&a, &b}, 1,
      [](plan::Step& s) {
        set_int(s, "broadcast", 1);
        set_int(s, "axis", 1);
      },
      6);
  EXPECT_EQ(values<float>(y[0]),
            (std::vector<float>{10, 10, 20, 20, 30, 30, 11, 11, 21, 21, 31, 31}));
}

TEST(CpuElementwise, LargeBroadcastTakesTheParallelPathCorrectly) {
  std::vector<float> av(300 * 200), bv(200);
  for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i);
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(i) * 0.5f;
  const Tensor a = make<float>({300, 200}, av);
  const Tensor b = make<float>({200}, bv);
  const auto y = values<float>(run_op("Mul", {&a, &b})[0]);
  for (size_t i = 0; i < av.size(); i += 997) EXPECT_EQ(y[i], av[i] * bv[i % 200]) << i;
  const auto z = values<float>(run_op("Add", {&a, &a})[0]);
  for (size_t i = 0; i < av.size(); i += 991) EXPECT_EQ(z[i], 2 * av[i]) << i;
}

TEST(CpuElementwise, IncompatibleShapesFailNamingTheNode) {
  const Tensor a = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = make<float>({2}, {1, 2});
  try {
    run_op("Add", {&a, &b});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("n_Add"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2,3] and [2] do not broadcast"), std::string::npos)
        << e.what();
  }
}

TEST(CpuElementwise, IntegerDivTruncatesAndModFollowsTheSignRule) {
  const Tensor a = make<int32_t>({4}, {-7, 7, -7, 7});
  const Tensor b = make<int32_t>({4}, {2, -2, 3, -3});
  EXPECT_EQ(values<int32_t>(run_op("Div", {&a, &b})[0]), (std::vector<int32_t>{-3, -3, -2, -2}));
  // Python-style: the result has the divisor's sign.
  EXPECT_EQ(values<int32_t>(run_op("Mod", {&a, &b})[0]), (std::vector<int32_t>{1, -1, 2, -2}));
  // fmod=1: C's remainder, the dividend's sign.
  const auto c = run_op("Mod", {&a, &b}, 1, [](plan::Step& s) { set_int(s, "fmod", 1); });
  EXPECT_EQ(values<int32_t>(c[0]), (std::vector<int32_t>{-1, 1, -1, 1}));
  const Tensor x = make<float>({2}, {-7.5f, 7.5f});
  const Tensor y = make<float>({2}, {2.0f, -2.0f});
  const auto f = run_op("Mod", {&x, &y}, 1, [](plan::Step& s) { set_int(s, "fmod", 1); });
  EXPECT_EQ(values<float>(f[0]), (std::vector<float>{-1.5f, 1.5f}));
}

TEST(CpuElementwise, IntegerArithmeticWrapsAroundLikeNumpy) {
  const Tensor a = make<int32_t>({2}, {INT32_MAX, INT32_MIN});
  const Tensor one = make<int32_t>({}, {1});
  const Tensor minus_one = make<int32_t>({}, {-1});
  EXPECT_EQ(values<int32_t>(run_op("Add", {&a, &one})[0]),
            (std::vector<int32_t>{INT32_MIN, INT32_MIN + 1}));
  EXPECT_EQ(values<int32_t>(run_op("Div", {&a, &minus_one})[0]),
            (std::vector<int32_t>{-INT32_MAX, INT32_MIN}));
  const Tensor u = make<uint16_t>({1}, {65535});
  EXPECT_EQ(values<uint16_t>(run_op("Mul", {&u, &u})[0]), (std::vector<uint16_t>{1}));
}

TEST(CpuElementwise, PowMixesBaseAndExponentTypes) {
  const Tensor xi = make<int32_t>({3}, {2, 3, -2});
  const Tensor ef = make<float>({3}, {3.0f, 0.5f, 2.0f});
  // Integer base, float exponent: computed in double, truncated to the base type.
  EXPECT_EQ(values<int32_t>(run_op("Pow", {&xi, &ef})[0]), (std::vector<int32_t>{8, 1, 4}));
  const Tensor xf = make<float>({3}, {2.0f, 9.0f, -2.0f});
  const Tensor ei = make<int64_t>({3}, {10, 0, 3});
  EXPECT_EQ(values<float>(run_op("Pow", {&xf, &ei})[0]),
            (std::vector<float>{1024.0f, 1.0f, -8.0f}));
  const Tensor ii = make<int64_t>({3}, {3, 2, 5});
  const Tensor bi = make<int64_t>({}, {3});
  EXPECT_EQ(values<int64_t>(run_op("Pow", {&ii, &bi})[0]), (std::vector<int64_t>{27, 8, 125}));
}

TEST(CpuElementwise, HalfAddRoundsOnceToNearestEven) {
  // 1 + 2^-11 lies exactly between two fp16 values: ties go to the even one (1.0);
  // 1 + 3 * 2^-11 ties between 1 + 2^-10 and 1 + 2^-9 and goes to 1 + 2^-9 (even mantissa).
  const Tensor a = make<Half>({2}, {h(1.0f), h(1.0f)});
  const Tensor b = make<Half>({2}, {h(0x1p-11f), h(3 * 0x1p-11f)});
  const auto y = run_op("Add", {&a, &b});
  EXPECT_EQ(y[0].dtype(), DType::kFloat16);
  EXPECT_EQ(half_to_float(y[0].data<Half>()[0]), 1.0f);
  EXPECT_EQ(half_to_float(y[0].data<Half>()[1]), 1.0f + 0x1p-9f);
}

TEST(CpuElementwise, VariadicSumOfHalvesRoundsOnlyAtTheStore) {
  // Rounding after each addition would give 1 + 2^-11 -> 1, then 1 again; fp32 opmath keeps
  // 1 + 2^-10, which fp16 represents exactly.
  const Tensor a = make<Half>({1}, {h(1.0f)});
  const Tensor b = make<Half>({1}, {h(0x1p-11f)});
  const auto y = run_op("Sum", {&a, &b, &b});
  EXPECT_EQ(half_to_float(y[0].data<Half>()[0]), 1.0f + 0x1p-10f);
  const Tensor c = make<BFloat16>({2}, {float_to_bf16(1.0f), float_to_bf16(3.0f)});
  const auto m = run_op("Mean", {&c, &c, &c});
  EXPECT_EQ(bf16_to_float(m[0].data<BFloat16>()[1]), 3.0f);
}

TEST(CpuElementwise, VariadicMaxMinBroadcastAndPropagateNaN) {
  const Tensor a = make<float>({3}, {1, NAN, 5});
  const Tensor b = make<float>({2, 1}, {2, 4});
  const auto mx = values<float>(run_op("Max", {&a, &b})[0]);
  EXPECT_EQ(mx[0], 2);
  EXPECT_TRUE(std::isnan(mx[1]));
  EXPECT_EQ(mx[2], 5);
  EXPECT_EQ(mx[3], 4);
  const Tensor c = make<uint8_t>({3}, {1, 200, 7});
  const Tensor d = make<uint8_t>({3}, {3, 100, 7});
  EXPECT_EQ(values<uint8_t>(run_op("Min", {&c, &d})[0]), (std::vector<uint8_t>{1, 100, 7}));
  EXPECT_EQ(values<uint8_t>(run_op("Max", {&c})[0]), (std::vector<uint8_t>{1, 200, 7}));
}

TEST(CpuElementwise, ComparisonsAndLogicGiveBool) {
  const Tensor a = make<int64_t>({3}, {1, 2, 3});
  const Tensor b = make<int64_t>({}, {2});
  const auto lt = run_op("Less", {&a, &b});
  EXPECT_EQ(lt[0].dtype(), DType::kBool);
  EXPECT_EQ(values<bool>(lt[0]), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(values<bool>(run_op("GreaterOrEqual", {&a, &b})[0]),
            (std::vector<bool>{false, true, true}));
  EXPECT_EQ(values<bool>(run_op("Equal", {&a, &b})[0]), (std::vector<bool>{false, true, false}));
  const Tensor p = make<bool>({2, 1}, {true, false});
  const Tensor q = make<bool>({2}, {true, false});
  EXPECT_EQ(values<bool>(run_op("Xor", {&p, &q})[0]),
            (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(values<bool>(run_op("And", {&p, &q})[0]),
            (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(values<bool>(run_op("Not", {&q})[0]), (std::vector<bool>{false, true}));
}

TEST(CpuElementwise, WhereBroadcastsAllThreeInputs) {
  const Tensor c = make<bool>({2, 1}, {true, false});
  const Tensor x = make<float>({3}, {1, 2, 3});
  const Tensor y = make<float>({}, {-1});
  const auto out = run_op("Where", {&c, &x, &y});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 2, 3, -1, -1, -1}));
}

TEST(CpuElementwise, LargeWhereSplitsRowsAndChunksCorrectly) {
  std::vector<bool> cv(300 * 200);
  std::vector<float> xv(300 * 200);
  for (size_t i = 0; i < cv.size(); ++i) {
    cv[i] = i % 3 == 0;
    xv[i] = static_cast<float>(i);
  }
  Tensor c(DType::kBool, {300, 200});
  for (size_t i = 0; i < cv.size(); ++i) c.data<bool>()[i] = cv[i];
  const Tensor x = make<float>({300, 200}, xv);
  const Tensor y = make<float>({300, 1}, std::vector<float>(300, -1.0f));
  Tensor row(DType::kBool, {200});
  for (int64_t i = 0; i < 200; ++i) row.data<bool>()[i] = i % 2 == 0;
  const auto flat = values<float>(run_op("Where", {&c, &x, &x})[0]);
  EXPECT_EQ(flat, xv);
  const auto mixed = run_op("Where", {&c, &x, &y});  // y broadcasts [300,1] -> [300,200]
  EXPECT_EQ(mixed[0].shape(), (std::vector<int64_t>{300, 200}));
  const auto rows = values<float>(run_op("Where", {&row, &x, &y})[0]);
  for (size_t i = 0; i < xv.size(); i += 113) {
    EXPECT_EQ(mixed[0].data<float>()[i], cv[i] ? xv[i] : -1.0f) << i;
    EXPECT_EQ(rows[i], i % 2 == 0 ? xv[i] : -1.0f) << i;
  }
}

// Where picks by the elements' bits (kernels/cpu/elementwise.h select_map): for elements of 1,
// 2, 4 and 8 bytes, in each row form (all full, one side a scalar, a broadcast), on a random
// mask large enough for the threads to share it, the chosen element's every bit (NaN payloads,
// -0) against a loop over the indices; a 16-bit float NaN quieted, as its fp32 round trip
// (base/half.h, what the fused kernels compute with) leaves it.
template <typename T>
void expect_where_picks_bits(DType t) {
  SCOPED_TRACE(dtype_name(t));
  const int64_t rows = 96, cols = 1000;
  Tensor c(DType::kBool, {rows, cols});
  Tensor a(t, {rows, cols}), b(t, {rows, cols});
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 11;
  };
  for (int64_t i = 0; i < c.numel(); ++i) c.data<bool>()[i] = next() % 2;
  for (Tensor* x : {&a, &b}) {
    auto* bytes = static_cast<uint8_t*>(x->raw());
    for (size_t i = 0; i < x->nbytes(); ++i) bytes[i] = static_cast<uint8_t>(next());
    if constexpr (!std::is_same_v<T, bool>) continue;
    for (int64_t i = 0; i < x->numel(); ++i) x->data<bool>()[i] = next() % 2;  // 0 or 1 only
  }
  Tensor a1(t, {}), bcol(t, {rows, 1});
  std::memcpy(a1.raw(), a.raw(), sizeof(T));
  std::memcpy(bcol.raw(), b.raw(), sizeof(T) * rows);
  struct Form {
    const Tensor *x, *y;
  };
  for (const Form& f : {Form{&a, &b}, Form{&a, &a1}, Form{&a1, &b}, Form{&bcol, &a}}) {
    const Tensor out = run_op("Where", {&c, f.x, f.y})[0];
    ASSERT_EQ(out.shape(), (std::vector<int64_t>{rows, cols}));
    auto at = [&](const Tensor& x, int64_t r, int64_t k) {
      const int64_t i = x.rank() == 0 ? 0 : x.dim(1) == 1 ? r : r * cols + k;
      return static_cast<const uint8_t*>(x.raw()) + i * static_cast<int64_t>(sizeof(T));
    };
    int64_t wrong = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k < cols; ++k) {
        T want;
        std::memcpy(&want, at(c.data<bool>()[r * cols + k] ? *f.x : *f.y, r, k), sizeof(T));
        if constexpr (std::is_same_v<T, BFloat16>) want = float_to_bf16(bf16_to_float(want));
        if constexpr (std::is_same_v<T, Half>) want = float_to_half(half_to_float(want));
        wrong += std::memcmp(at(out, r, k), &want, sizeof(T)) != 0;
      }
    }
    EXPECT_EQ(wrong, 0);
  }
}

TEST(CpuElementwise, WherePicksTheChosenElementsBitsForEveryWidth) {
  expect_where_picks_bits<bool>(DType::kBool);
  expect_where_picks_bits<int8_t>(DType::kInt8);
  expect_where_picks_bits<BFloat16>(DType::kBFloat16);
  expect_where_picks_bits<Half>(DType::kFloat16);
  expect_where_picks_bits<float>(DType::kFloat32);
  expect_where_picks_bits<double>(DType::kFloat64);
  expect_where_picks_bits<int64_t>(DType::kInt64);
}

TEST(CpuElementwise, ClipTakesAttributesBeforeOpset11AndOptionalInputsAfter) {
  const Tensor x = make<float>({4}, {-5, -1, 1, 5});
  const auto old = run_op(
      "Clip", {&x}, 1,
      [](plan::Step& s) {
        set_float(s, "min", -2);
        set_float(s, "max", 2);
      },
      6);
  EXPECT_EQ(values<float>(old[0]), (std::vector<float>{-2, -1, 1, 2}));
  const Tensor hi = make<float>({}, {0.5f});
  EXPECT_EQ(values<float>(run_op("Clip", {&x, nullptr, &hi})[0]),
            (std::vector<float>{-5, -1, 0.5f, 0.5f}));
  const Tensor xi = make<int8_t>({3}, {-100, 0, 100});
  const Tensor lo = make<int8_t>({}, {-10});
  EXPECT_EQ(values<int8_t>(run_op("Clip", {&xi, &lo})[0]), (std::vector<int8_t>{-10, 0, 100}));
}

TEST(CpuElementwise, CastRoundsToNearestEvenOnceEvenFromDouble) {
  // 1 + 2^-11 + 2^-40 is just above the fp16 midpoint: it rounds up. Going through fp32 first
  // would lose the 2^-40 and then tie to even (down).
  const Tensor d = make<double>({2}, {1.0 + 0x1p-11 + 0x1p-40, 65520.0});
  const auto y = run_op("Cast", {&d}, 1, [](plan::Step& s) { set_int(s, "to", 10); });
  EXPECT_EQ(half_to_float(y[0].data<Half>()[0]), 1.0f + 0x1p-10f);
  EXPECT_TRUE(std::isinf(half_to_float(y[0].data<Half>()[1])));
  const Tensor f = make<float>({4}, {-2.7f, 2.7f, 0.0f, 0.25f});
  EXPECT_EQ(values<int32_t>(run_op("Cast", {&f}, 1, [](plan::Step& s) { set_int(s, "to", 6); })[0]),
            (std::vector<int32_t>{-2, 2, 0, 0}));
  EXPECT_EQ(values<bool>(run_op("Cast", {&f}, 1, [](plan::Step& s) { set_int(s, "to", 9); })[0]),
            (std::vector<bool>{true, true, false, true}));
  const auto bf = run_op("Cast", {&f}, 1, [](plan::Step& s) { set_int(s, "to", 16); });
  EXPECT_EQ(bf16_to_float(bf[0].data<BFloat16>()[1]), 2.703125f);  // RNE of 2.7f
}

TEST(CpuElementwise, CastBeforeOpset6NamesTheType) {
  const Tensor f = make<float>({2}, {1.5f, -2.5f});
  const auto y = run_op(
      "Cast", {&f}, 1, [](plan::Step& s) { set_string(s, "to", "INT64"); }, 1);
  EXPECT_EQ(values<int64_t>(y[0]), (std::vector<int64_t>{1, -2}));
}

TEST(CpuElementwise, CastToAndFromStrings) {
  const Tensor f = make<float>({3}, {0.5f, -3.0f, 0.1f});
  const auto s = run_op("Cast", {&f}, 1, [](plan::Step& st) { set_int(st, "to", 8); });
  EXPECT_EQ(s[0].strings(), (std::vector<std::string>{"0.5", "-3", "0.1"}));
  const Tensor like = make<double>({1}, {0});
  const auto back = run_op("CastLike", {&s[0], &like});
  EXPECT_EQ(values<double>(back[0]), (std::vector<double>{0.5, -3.0, 0.1}));
}

TEST(CpuElementwise, UnaryMathAndActivations) {
  const Tensor x = make<float>({4}, {-2, -0.5f, 0, 3});
  EXPECT_EQ(values<float>(run_op("Relu", {&x})[0]), (std::vector<float>{0, 0, 0, 3}));
  EXPECT_EQ(values<float>(run_op("Abs", {&x})[0]), (std::vector<float>{2, 0.5f, 0, 3}));
  EXPECT_EQ(values<float>(run_op("Sign", {&x})[0]), (std::vector<float>{-1, -1, 0, 1}));
  const auto lr = run_op("LeakyRelu", {&x}, 1, [](plan::Step& s) { set_float(s, "alpha", 0.5f); });
  EXPECT_EQ(values<float>(lr[0]), (std::vector<float>{-1, -0.25f, 0, 3}));
  const auto sg = values<float>(run_op("Sigmoid", {&x})[0]);
  EXPECT_NEAR(sg[0], 1 / (1 + std::exp(2.0)), 1e-7);
  EXPECT_EQ(sg[2], 0.5f);
  const auto hs = values<float>(run_op("HardSigmoid", {&x})[0]);
  EXPECT_FLOAT_EQ(hs[0], 0.1f);
  const Tensor r = make<float>({4}, {0.5f, 1.5f, 2.5f, -2.5f});
  EXPECT_EQ(values<float>(run_op("Round", {&r})[0]), (std::vector<float>{0, 2, 2, -2}));
  const Tensor i = make<int32_t>({3}, {-4, 0, 4});
  EXPECT_EQ(values<int32_t>(run_op("Neg", {&i})[0]), (std::vector<int32_t>{4, 0, -4}));
  EXPECT_EQ(values<int32_t>(run_op("Relu", {&i})[0]), (std::vector<int32_t>{0, 0, 4}));
  const Tensor sh = make<float>({3}, {-1, 0.2f, 2});
  const auto shrink = run_op("Shrink", {&sh}, 1, [](plan::Step& s) { set_float(s, "bias", 0.5f); });
  EXPECT_EQ(values<float>(shrink[0]), (std::vector<float>{-0.5f, 0, 1.5f}));
}

TEST(CpuElementwise, IsInfHonoursItsFlags) {
  const Tensor x = make<float>({4}, {INFINITY, -INFINITY, NAN, 1});
  EXPECT_EQ(values<bool>(run_op("IsInf", {&x})[0]), (std::vector<bool>{true, true, false, false}));
  const auto pos =
      run_op("IsInf", {&x}, 1, [](plan::Step& s) { set_int(s, "detect_negative", 0); });
  EXPECT_EQ(values<bool>(pos[0]), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(values<bool>(run_op("IsNaN", {&x})[0]), (std::vector<bool>{false, false, true, false}));
}

TEST(CpuElementwise, PReluBroadcastsSlopeToX) {
  const Tensor x = make<float>({2, 2, 1}, {-1, 1, -2, 2});
  const Tensor slope = make<float>({2, 1}, {0.5f, 0.25f});
  EXPECT_EQ(values<float>(run_op("PRelu", {&x, &slope})[0]), (std::vector<float>{-0.5f, 1, -1, 2}));
  // Opset 6: a 1-D slope holds one value per channel (axis 1).
  const Tensor x3 = make<float>({1, 2, 2}, {-1, -2, -3, -4});
  const Tensor s3 = make<float>({2}, {0.5f, 2.0f});
  EXPECT_EQ(values<float>(run_op("PRelu", {&x3, &s3}, 1, {}, 6)[0]),
            (std::vector<float>{-0.5f, -1, -6, -8}));
}

TEST(CpuElementwise, BitShiftAndItsDirection) {
  const Tensor a = make<uint8_t>({3}, {1, 16, 255});
  const Tensor b = make<uint8_t>({3}, {3, 2, 8});
  const auto l =
      run_op("BitShift", {&a, &b}, 1, [](plan::Step& s) { set_string(s, "direction", "LEFT"); });
  EXPECT_EQ(values<uint8_t>(l[0]), (std::vector<uint8_t>{8, 64, 0}));
  EXPECT_THROW(
      run_op("BitShift", {&a, &b}, 1, [](plan::Step& s) { set_string(s, "direction", "UP"); }),
      Error);
}

TEST(CpuElementwise, DropoutIsIdentityInInferenceAndSeededInTraining) {
  std::vector<float> v(1000, 1.0f);
  const Tensor x = make<float>({1000}, v);
  const auto inf = run_op("Dropout", {&x}, 2);
  EXPECT_EQ(values<float>(inf[0]), v);
  EXPECT_EQ(values<bool>(inf[1]), std::vector<bool>(1000, true));
  const Tensor ratio = make<float>({}, {0.25f});
  const Tensor train = make<bool>({}, {true});
  auto seeded = [](plan::Step& s) { set_int(s, "seed", 7); };
  const auto a = run_op("Dropout", {&x, &ratio, &train}, 2, seeded);
  const auto b = run_op("Dropout", {&x, &ratio, &train}, 2, seeded);
  EXPECT_EQ(values<float>(a[0]), values<float>(b[0]));
  int kept = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    const bool m = a[1].data<bool>()[i];
    kept += m;
    EXPECT_EQ(a[0].data<float>()[i], m ? 1.0f / 0.75f : 0.0f);
  }
  EXPECT_GT(kept, 650);
  EXPECT_LT(kept, 850);
}

// The training mask's statistics against the binomial it should follow (an independent
// oracle: the keep probability 1 - ratio, elements independent), and its bits whatever the
// thread count (the draws are counter-based).
TEST(CpuElementwise, DropoutMaskIsUniformIndependentAndThreadCountFree) {
  constexpr int64_t n = 200000;
  const Tensor x = make<float>({n}, std::vector<float>(n, 1.0f));
  const Tensor ratio = make<float>({}, {0.3f});
  const Tensor train = make<bool>({}, {true});
  auto mask = [&](int seed, int threads) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    const auto out = run_op("Dropout", {&x, &ratio, &train}, 2,
                            [seed](plan::Step& s) { set_int(s, "seed", seed); });
    omp_set_num_threads(before);
    return values<bool>(out[1]);
  };
  const std::vector<bool> a = mask(11, 4), b = mask(12, 4);
  EXPECT_EQ(a, mask(11, 1));
  // Within 5 standard deviations of the expected count, for: kept elements (p = 0.7),
  // neighbours both kept (0.49), the same choice under two seeds (0.7^2 + 0.3^2 = 0.58).
  auto near = [](int64_t count, int64_t trials, double p, const char* what) {
    const double mean = static_cast<double>(trials) * p;
    const double sd = std::sqrt(mean * (1 - p));
    EXPECT_NEAR(static_cast<double>(count), mean, 5 * sd) << what;
  };
  int64_t kept = 0, pairs = 0, same = 0;
  for (int64_t i = 0; i < n; ++i) {
    kept += a[i];
    same += a[i] == b[i];
    if (i + 1 < n) pairs += a[i] && a[i + 1];
  }
  near(kept, n, 0.7, "kept");
  near(pairs, n - 1, 0.49, "neighbours kept");
  near(same, n, 0.58, "seeds agreeing");
}

TEST(CpuElementwise, QuantizeRoundsHalfToEvenAndSaturates) {
  const Tensor x = make<float>({4}, {-1.5f, 0.0f, 2.5f, 300.0f});
  const Tensor one = make<float>({}, {1.0f});
  EXPECT_EQ(values<uint8_t>(run_op("QuantizeLinear", {&x, &one})[0]),
            (std::vector<uint8_t>{0, 0, 2, 255}));
  const Tensor xs = make<float>({2}, {-3.0f, 3.0f});
  const Tensor two = make<float>({}, {2.0f});
  const Tensor zp = make<int8_t>({}, {-1});
  EXPECT_EQ(values<int8_t>(run_op("QuantizeLinear", {&xs, &two, &zp})[0]),
            (std::vector<int8_t>{-3, 1}));
  const Tensor q = make<uint8_t>({2, 2}, {0, 255, 0, 255});
  const Tensor scales = make<float>({2}, {0.5f, 1.0f});  // per row (axis 0)
  const Tensor zps = make<uint8_t>({2}, {128, 0});
  const auto d = run_op("DequantizeLinear", {&q, &scales, &zps}, 1,
                        [](plan::Step& s) { set_int(s, "axis", 0); });
  EXPECT_EQ(values<float>(d[0]), (std::vector<float>{-64.0f, 63.5f, 0.0f, 255.0f}));
}

TEST(CpuElementwise, UnsupportedTypesAndAttributeValuesFailClearly) {
  const Tensor i = make<int32_t>({1}, {4});
  try {
    run_op("Sqrt", {&i});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("element type i32 of input 0 is not supported"),
              std::string::npos)
        << e.what();
  }
  const Tensor f = make<float>({1}, {1});
  EXPECT_THROW(run_op("Add", {&i, &f}), Error);
}

}  // namespace
}  // namespace ampc::rt::cpu
