// base/bf16_convert's f32 <-> bf16 loops against base/half.h's scalar conversions
// (whose roundings half_bits_test.cc pins to hand-written bit patterns): every bf16 pattern
// widened, and f32 patterns narrowed: a sweep across the whole 32-bit range plus the
// neighbourhoods where rounding has cases (ties to even either way, the carry into the
// exponent, the largest finite values rounding to infinity, subnormals, signalling and
// quiet NaNs with payloads). Every length up to 40 at every start offset up to 16 checks
// the masked tails, and that nothing past the end is written.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/bf16_convert.h"
#include "base/half.h"

namespace ampc {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::vector<uint32_t> f32_patterns() {
  std::vector<uint32_t> p;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 65521) p.push_back(static_cast<uint32_t>(u));
  const uint32_t centres[] = {
      0x00000000, 0x00008000, 0x00018000, 0x007fffff, 0x00800000,  // zero, subnormal ties
      0x3f808000, 0x3f818000, 0x3f80ffff, 0x3fff8000, 0x3fffffff,  // ties, carry into exponent
      0x7f7f8000, 0x7f7fffff, 0x7f800000,                          // largest finite, infinity
      0x7f800001, 0x7f80ffff, 0x7fbfffff, 0x7fc00000, 0x7fffffff,  // signalling, quiet NaNs
  };
  for (uint32_t c : centres) {
    for (uint32_t d = 0; d < 64; ++d) {
      for (uint32_t sign : {0u, 0x80000000u}) {
        p.push_back((c + d) | sign);
        p.push_back((c - d) | sign);
      }
    }
  }
  return p;
}

TEST(ConvertAvx512, NarrowingRoundsAsTheScalarConversion) {
  if (!convert_avx512_available()) GTEST_SKIP() << "no AVX512F/BW/VL on this CPU";
  const std::vector<uint32_t> bits = f32_patterns();
  std::vector<float> x(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) x[i] = from_bits(bits[i]);
  std::vector<uint16_t> y(x.size());
  f32_to_bf16_avx512(x.data(), y.data(), static_cast<int64_t>(x.size()));
  int failures = 0;
  for (size_t i = 0; i < x.size() && failures < 10; ++i) {
    const uint16_t want = float_to_bf16(x[i]).bits;
    if (y[i] != want) {
      ++failures;
      ADD_FAILURE() << std::hex << "f32 0x" << bits[i] << ": got 0x" << y[i] << ", want 0x" << want;
    }
  }
}

TEST(ConvertAvx512, WideningIsExactForEveryPattern) {
  if (!convert_avx512_available()) GTEST_SKIP() << "no AVX512F/BW/VL on this CPU";
  std::vector<uint16_t> x(65536);
  for (uint32_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint16_t>(i);
  std::vector<float> y(x.size());
  bf16_to_f32_avx512(x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (uint32_t i = 0; i < x.size(); ++i) {
    uint32_t got;
    std::memcpy(&got, &y[i], sizeof got);
    ASSERT_EQ(got, i << 16) << "bf16 0x" << std::hex << i;
  }
}

TEST(ConvertAvx512, TailsWriteExactlyTheirElements) {
  if (!convert_avx512_available()) GTEST_SKIP() << "no AVX512F/BW/VL on this CPU";
  constexpr uint16_t kGuard16 = 0xdead;
  constexpr uint32_t kGuard32 = 0xdeadbeef;
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f + static_cast<float>(i) / 256.0f + 1e-5f;
  for (int64_t offset = 0; offset <= 16; ++offset) {
    for (int64_t n = 0; n <= 40; ++n) {
      std::vector<uint16_t> h(64, kGuard16);
      f32_to_bf16_avx512(x.data() + offset, h.data() + offset, n);
      std::vector<uint32_t> w(64, kGuard32);
      bf16_to_f32_avx512(h.data() + offset, reinterpret_cast<float*>(w.data()) + offset, n);
      for (int64_t i = 0; i < 64; ++i) {
        const bool inside = i >= offset && i < offset + n;
        const uint16_t want16 = inside ? float_to_bf16(x[i]).bits : kGuard16;
        ASSERT_EQ(h[i], want16) << "narrowing, offset " << offset << " length " << n << " at " << i;
        const uint32_t want32 = inside ? static_cast<uint32_t>(want16) << 16 : kGuard32;
        ASSERT_EQ(w[i], want32) << "widening, offset " << offset << " length " << n << " at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace ampc
