// base/half.h's scalar conversions called directly, with the expected results written by hand
// as bit patterns (fp32 input bits -> 16-bit output bits), so that no expected value comes
// from the code under test: round to nearest with ties to even (a tie is exactly half an
// ulp of the 16-bit format), subnormals and their ties, overflow to infinity (fp16: from
// 65520, the tie between 65504 and 2^16), NaN payloads kept in the high bits and signalling
// NaNs quieted (never turned into an infinity). The fp16 values were checked against
// numpy's float32 -> float16 cast, an independent implementation of the same rounding.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "base/half.h"

namespace ampc {
namespace {

struct Case {
  uint32_t in;    // fp32 bits
  uint16_t want;  // 16-bit bits
  const char* what;
};

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

TEST(HalfBits, FloatToHalfRoundsToNearestEven) {
  const Case cases[] = {
      {0x3f800000, 0x3c00, "1"},
      {0xc0000000, 0xc000, "-2"},
      {0x3f802000, 0x3c01, "1 + 2^-10, exact"},
      {0x3f801000, 0x3c00, "1 + 2^-11: tie, down to the even 1"},
      {0x3f801001, 0x3c01, "just above that tie: up"},
      {0x3f800fff, 0x3c00, "just below that tie: down"},
      {0x3f803000, 0x3c02, "1 + 3 * 2^-11: tie, up to the even 1 + 2^-9"},
      {0xbf801000, 0xbc00, "-(1 + 2^-11): tie, towards zero (to even), not away"},
      {0xbf803000, 0xbc02, "-(1 + 3 * 2^-11): tie, away from zero (to even)"},
      {0x477fe000, 0x7bff, "65504, the largest fp16"},
      {0x477fefff, 0x7bff, "just below 65520: down to 65504"},
      {0x80000000, 0x8000, "-0"},
      {0x00000000, 0x0000, "+0"},
      {0xaedbe6ff, 0x8000, "-1e-10: underflows to -0"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(float_to_half(bits_float(c.in)).bits, c.want) << c.what << " (" << hex(c.in) << ")";
}

TEST(HalfBits, FloatToHalfSubnormals) {
  const Case cases[] = {
      {0x33800000, 0x0001, "2^-24, the smallest subnormal"},
      {0x33000000, 0x0000, "2^-25: tie between 0 and 2^-24, down to even 0"},
      {0x33000001, 0x0001, "just above 2^-25: up"},
      {0x32ffffff, 0x0000, "just below 2^-25: zero"},
      {0x33c00000, 0x0002, "1.5 * 2^-24: tie, up to even 2"},
      {0x34200000, 0x0002, "2.5 * 2^-24: tie, down to even 2"},
      {0xb3c00000, 0x8002, "-1.5 * 2^-24"},
      {0x387fc000, 0x03ff, "1023 * 2^-24, the largest subnormal"},
      {0x387fe000, 0x0400, "1023.5 * 2^-24: tie, up to the smallest normal 2^-14"},
      {0x38800000, 0x0400, "2^-14, the smallest normal"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(float_to_half(bits_float(c.in)).bits, c.want) << c.what << " (" << hex(c.in) << ")";
}

TEST(HalfBits, FloatToHalfOverflowsToInfinity) {
  const Case cases[] = {
      {0x477ff000, 0x7c00, "65520: tie between 65504 (odd) and 2^16 (even, not finite): inf"},
      {0xc77ff000, 0xfc00, "-65520: -inf"},
      {0x47800000, 0x7c00, "65536"},
      {0x49742400, 0x7c00, "1e6"},
      {0x7f7fffff, 0x7c00, "the largest fp32"},
      {0x7f800000, 0x7c00, "inf"},
      {0xff800000, 0xfc00, "-inf"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(float_to_half(bits_float(c.in)).bits, c.want) << c.what << " (" << hex(c.in) << ")";
}

TEST(HalfBits, FloatToHalfNaNKeepsPayloadAndIsQuiet) {
  // The payload's top 10 bits are kept, the quiet bit (0x200) is set: never an infinity.
  const Case cases[] = {
      {0x7fc00000, 0x7e00, "the default quiet NaN"},
      {0xffc00000, 0xfe00, "negative quiet NaN"},
      {0x7fc02000, 0x7e01, "quiet NaN with payload bit 13"},
      {0x7f800001, 0x7e00, "signalling NaN, payload only below bit 13: quiet, not inf"},
      {0x7fa00000, 0x7f00, "signalling NaN with payload bit 21: quieted, payload kept"},
      {0xff800001, 0xfe00, "negative signalling NaN"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(float_to_half(bits_float(c.in)).bits, c.want) << c.what << " (" << hex(c.in) << ")";
}

TEST(HalfBits, FloatToBf16RoundsToNearestEven) {
  const Case cases[] = {
      {0x3f800000, 0x3f80, "1"},
      {0x3f808000, 0x3f80, "1 + 2^-8: tie, down to the even 1"},
      {0x3f808001, 0x3f81, "just above that tie: up"},
      {0x3f807fff, 0x3f80, "just below that tie: down"},
      {0x3f818000, 0x3f82, "1 + 3 * 2^-8: tie, up to even"},
      {0xbf808000, 0xbf80, "-(1 + 2^-8): tie, towards zero (to even), not away"},
      {0xbf818000, 0xbf82, "-(1 + 3 * 2^-8): tie, away from zero (to even)"},
      {0x80000000, 0x8000, "-0"},
      {0x00008000, 0x0000, "fp32 subnormal tie: down to even 0"},
      {0x00008001, 0x0001, "fp32 subnormal above the tie: the smallest bf16 subnormal"},
      {0x00018000, 0x0002, "fp32 subnormal tie: up to even 2"},
      {0x00000001, 0x0000, "the smallest fp32 subnormal: 0"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(float_to_bf16(bits_float(c.in)).bits, c.want) << c.what << " (" << hex(c.in) << ")";
}

TEST(HalfBits, FloatToBf16OverflowAndNaN) {
  const Case cases[] = {
      {0x7f7f7fff, 0x7f7f, "below the tie above the largest bf16: the largest bf16"},
      {0x7f7f8000, 0x7f80, "tie above the largest bf16 (odd): inf"},
      {0x7f7fffff, 0x7f80, "the largest fp32: inf"},
      {0xff7fffff, 0xff80, "the most negative fp32: -inf"},
      {0x7f800000, 0x7f80, "inf"},
      {0xff800000, 0xff80, "-inf"},
      {0x7fc00000, 0x7fc0, "quiet NaN"},
      {0xffc00000, 0xffc0, "negative quiet NaN"},
      {0x7f800001, 0x7fc0, "signalling NaN with a low payload: quiet NaN, not inf"},
      {0x7f810000, 0x7fc1, "signalling NaN with payload 0x01: quieted, payload kept"},
      {0x7fa12345, 0x7fe1, "signalling NaN: payload's high bits kept, no rounding carry"},
      {0x7fffffff, 0x7fff, "all-ones NaN: no carry into the sign"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(float_to_bf16(bits_float(c.in)).bits, c.want) << c.what << " (" << hex(c.in) << ")";
}

TEST(HalfBits, WideningIsExact) {
  const std::pair<uint16_t, uint32_t> half[] = {
      {0x3c00, 0x3f800000}, {0x0001, 0x33800000}, {0x8001, 0xb3800000}, {0x03ff, 0x387fc000},
      {0x0400, 0x38800000}, {0x7bff, 0x477fe000}, {0x7c00, 0x7f800000}, {0xfc00, 0xff800000},
      {0x7e01, 0x7fc02000}, {0x8000, 0x80000000}};
  for (const auto& [in, want] : half) EXPECT_EQ(float_bits(half_to_float({in})), want) << in;
  const std::pair<uint16_t, uint32_t> bf16[] = {
      {0x3f80, 0x3f800000}, {0x0001, 0x00010000}, {0x7f80, 0x7f800000}, {0x7fc1, 0x7fc10000}};
  for (const auto& [in, want] : bf16) EXPECT_EQ(float_bits(bf16_to_float({in})), want) << in;
}

// The CPU's own conversion instructions (F16C: vcvtps2ph with round-to-nearest-even, vcvtph2ps)
// as a second, independent oracle: every fp16 value widened, and every 4099th fp32 bit pattern
// plus every pattern around fp16's subnormal, normal and overflow boundaries narrowed (all of
// them agreed once, offline). NaNs: both quiet them and keep the payload's top bits when
// narrowing; widening a signalling NaN, the instruction quiets it where base/half.h keeps it.
__attribute__((target("f16c"))) uint16_t f16c_narrow(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float f16c_widen(uint16_t h) {
  return _cvtsh_ss(h);
}

TEST(HalfBits, AgreesWithTheCpusF16cInstructions) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C instructions";
  for (uint32_t i = 0; i < 65536; ++i) {
    const float want = f16c_widen(static_cast<uint16_t>(i));
    const float got = half_to_float(Half{static_cast<uint16_t>(i)});
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << i;
      ASSERT_EQ(float_bits(got) | 0x00400000u, float_bits(want)) << i;  // payload, quiet bit
    } else {
      ASSERT_EQ(float_bits(got), float_bits(want)) << i;
    }
  }
  auto check = [](uint32_t u) {
    const float f = bits_float(u);
    ASSERT_EQ(float_to_half(f).bits, f16c_narrow(f)) << hex(u);
  };
  for (uint64_t u = 0; u < (1ull << 32); u += 4099) check(static_cast<uint32_t>(u));
  for (uint32_t centre : {0x33000000u, 0x38800000u, 0x477ff000u, 0x7f800000u}) {
    for (uint32_t d = 0; d < (1u << 16); ++d) {
      check(centre - (1u << 15) + d);
      check((centre - (1u << 15) + d) | 0x80000000u);
    }
  }
}

}  // namespace
}  // namespace ampc
