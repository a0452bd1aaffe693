// Dropout's shared draws and its twin (kernels/shared/dropout_math.h, kernels/twin/dropout.h),
// which is the CPU backend's Dropout and the reference of the CUDA kernel:
//  - the draws are SplitMix64's: under key 0 the first outputs of the generator seeded with 0,
//    as its authors publish them;
//  - every element type: kept elements scaled by 1 / (1 - ratio) in the compute type and rounded
//    once (the expected values computed here from the draws, with base/half.h's roundings), the
//    others zero; the bool and the value mask; the identity outside training mode; in parallel
//    and on one thread alike;
//  - the AVX-512 loop gives the element functor's bits;
//  - a key read through the run's word (as the CUDA kernel reads it from device memory) is
//    step_key of that word and the step.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/half.h"
#include "kernels/shared/dropout_math.h"
#include "kernels/twin/dropout.h"
#include "kernels/twin/dropout_avx512.h"

namespace ampc::kernels::twin {
namespace {

namespace sh = kernels::shared;

TEST(DropoutDraws, AreSplitMix64sPublishedOutputs) {
  // SplitMix64 seeded with 0 (Steele, Lea and Flood; the reference splitmix64.c).
  const uint64_t published[] = {0xE220A8397B1DCDAFull, 0x6E789E6AA1B965F4ull, 0x06C45D188009454Full,
                                0xF88BB8A8724C81ECull};
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(sh::uniform_at(0, i), static_cast<double>(published[i] >> 11) * 0x1p-53) << i;
    EXPECT_EQ(sh::mix64((i + 1) * 0x9E3779B97F4A7C15ull), published[i]) << i;
  }
  // A key shifts the generator's state: element i under key k is the output after state k.
  EXPECT_EQ(sh::uniform_at(0x9E3779B97F4A7C15ull, 0), sh::uniform_at(0, 1));
}

// Storage bits of v in type t (f32, f64, f16 or bf16), and back.
std::vector<uint8_t> stored(const std::vector<double>& v, DType t) {
  const size_t size = dtype_size(t);
  std::vector<uint8_t> out(v.size() * size);
  for (size_t i = 0; i < v.size(); ++i) {
    uint8_t* p = out.data() + i * size;
    if (t == DType::kFloat64) {
      std::memcpy(p, &v[i], 8);
    } else if (t == DType::kFloat32) {
      const float f = static_cast<float>(v[i]);
      std::memcpy(p, &f, 4);
    } else {
      const uint16_t h = t == DType::kFloat16 ? float_to_half(static_cast<float>(v[i])).bits
                                              : float_to_bf16(static_cast<float>(v[i])).bits;
      std::memcpy(p, &h, 2);
    }
  }
  return out;
}

double value_at(const std::vector<uint8_t>& b, DType t, size_t i) {
  const uint8_t* p = b.data() + i * dtype_size(t);
  if (t == DType::kFloat64) {
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  if (t == DType::kFloat32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == DType::kFloat16 ? half_to_float(Half{h}) : bf16_to_float(BFloat16{h});
}

// x * scale as the op computes it: in double for f64, else in float, rounded to t once.
std::vector<uint8_t> expected(const std::vector<uint8_t>& x, DType t, size_t n, uint64_t key,
                              double ratio, std::vector<bool>* keep) {
  std::vector<double> y(n);
  keep->assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    (*keep)[i] = sh::uniform_at(key, i) >= ratio;
    if (!(*keep)[i]) continue;
    if (t == DType::kFloat64) {
      y[i] = value_at(x, t, i) * (1.0 / (1.0 - ratio));
    } else {
      y[i] = static_cast<float>(value_at(x, t, i)) * static_cast<float>(1.0 / (1.0 - ratio));
    }
  }
  return stored(y, t);
}

TEST(TwinDropout, KeepsScalesAndMasksInEveryType) {
  const size_t n = 100003;  // over the parallel threshold, odd
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.37 * static_cast<double>(i)) * 3.0;
  const uint64_t key = 0x1234567;
  const double ratio = 0.3;
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    const std::string what(dtype_name(t));
    const auto x = stored(v, t);
    std::vector<bool> keep;
    const auto want = expected(x, t, n, key, ratio, &keep);
    for (int threads : {1, 2}) {
      const int before = omp_get_max_threads();
      omp_set_num_threads(threads);
      std::vector<uint8_t> y(x.size()), values(x.size());
      std::vector<uint8_t> mask(n, 7);  // bool storage
      dropout(t, x.data(), y.data(), reinterpret_cast<bool*>(mask.data()), values.data(),
              static_cast<int64_t>(n), ratio, true, {.fixed = key});
      omp_set_num_threads(before);
      ASSERT_EQ(y, want) << what << ", " << threads << " thread(s)";
      size_t kept = 0;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(mask[i], keep[i] ? 1 : 0) << what << " element " << i;
        ASSERT_EQ(value_at(values, t, i), keep[i] ? 1.0 : 0.0) << what << " element " << i;
        kept += keep[i];
      }
      // 70% kept, within 5 standard deviations.
      EXPECT_NEAR(static_cast<double>(kept), 0.7 * n, 5 * std::sqrt(0.21 * n)) << what;
    }
    // Outside training mode, or with ratio 0: the identity, every element kept.
    for (auto [training, r] : {std::pair{false, 0.3}, std::pair{true, 0.0}}) {
      std::vector<uint8_t> y(x.size()), mask(n, 0);
      dropout(t, x.data(), y.data(), reinterpret_cast<bool*>(mask.data()), nullptr,
              static_cast<int64_t>(n), r, training, {.fixed = key});
      EXPECT_EQ(y, x) << what;
      EXPECT_EQ(mask, std::vector<uint8_t>(n, 1)) << what;
    }
  }
  EXPECT_THROW(dropout(DType::kInt32, nullptr, nullptr, nullptr, nullptr, 4, 0.5, true, {}),
               std::exception);
}

// The AVX-512 loop (dropout_avx512.h) against the element functor one element at a time, over
// a range that starts past 0 and ends off a vector's width, with either mask, in every type.
template <typename T>
void check_vector_range(DType t) {
  const int64_t begin = 3, end = 1000 + 3 + 5;
  std::vector<double> v(static_cast<size_t>(end));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.11 * static_cast<double>(i)) * 5.0;
  const auto x = stored(v, t);
  for (bool bool_mask : {true, false}) {
    std::vector<uint8_t> y1(x.size()), y2(x.size()), m1(v.size()), m2(v.size());
    std::vector<uint8_t> values1(x.size()), values2(x.size());
    auto f = sh::dropout_element<T>(x.data(), y1.data(), nullptr, values1.data(), 0.3, true);
    f.key = 0xC0FFEE;
    if (bool_mask) f.mask = reinterpret_cast<bool*>(m1.data());
    for (int64_t i = begin; i < end; ++i) f(i);
    f.y = reinterpret_cast<T*>(y2.data());
    f.mask_values = reinterpret_cast<T*>(values2.data());
    if (bool_mask) f.mask = reinterpret_cast<bool*>(m2.data());
    if (!dropout_range_avx512(f, begin, end)) GTEST_SKIP() << "the CPU lacks AVX-512 DQ";
    EXPECT_EQ(y1, y2) << dtype_name(t);
    EXPECT_EQ(m1, m2) << dtype_name(t);
    EXPECT_EQ(values1, values2) << dtype_name(t);
  }
}

TEST(TwinDropout, VectorLoopGivesTheElementFunctorsBits) {
  check_vector_range<float>(DType::kFloat32);
  check_vector_range<double>(DType::kFloat64);
  check_vector_range<Half>(DType::kFloat16);
  check_vector_range<BFloat16>(DType::kBFloat16);
}

TEST(TwinDropout, ARunsKeyWordGivesTheStepKey) {
  const size_t n = 1000;
  const std::vector<float> x(n, 1.0f);
  const uint64_t run = sh::run_key(42, 3);
  std::vector<float> through_word(n), fixed(n);
  dropout(DType::kFloat32, x.data(), through_word.data(), nullptr, nullptr, n, 0.5, true,
          {.run = &run, .step = 17});
  dropout(DType::kFloat32, x.data(), fixed.data(), nullptr, nullptr, n, 0.5, true,
          {.fixed = sh::step_key(run, 17)});
  EXPECT_EQ(through_word, fixed);
  std::vector<float> other_step(n);
  dropout(DType::kFloat32, x.data(), other_step.data(), nullptr, nullptr, n, 0.5, true,
          {.run = &run, .step = 18});
  EXPECT_NE(other_step, fixed);
}

}  // namespace
}  // namespace ampc::kernels::twin
