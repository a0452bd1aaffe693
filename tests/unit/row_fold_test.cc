// The row kernels' host reductions (kernels/twin/row_host.h fold_row, its AVX-512 form
// kernels/twin/row_avx512.cc, and the Softmax / LogSoftmax twin built on them) against the
// kernels' order written out directly from the shared primitives: rowwise_tree.h's
// row_reduce_host (each emulated thread's elements in order, then the tree) and rowwise.h's
// per-element steps, as kernels/cuda/softmax.cu runs them. Bit for bit, the signs of zeros and
// NaN payloads included, over every row length from 1 to 3000 (partial last rounds of every
// size, n % 4 != 0 where the chunks are single elements) and long rows of 256 and 512 threads.
// One exception: where two NaNs of different payloads meet in an add or a multiply, which one
// the result keeps is the compiler's choice of operand order (x86 keeps the first source's; GCC
// orders commutative operands as it likes, differently in the generic loops, in the vector code
// and in this file's reference), so in a row that can hold two payloads a NaN result need only
// be one of them. Max is exact always (it compares; it never adds).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "base/half.h"
#include "kernels/shared/rowwise.h"
#include "kernels/shared/rowwise_fp.h"
#include "kernels/shared/rowwise_tree.h"
#include "kernels/twin/row_avx512.h"
#include "kernels/twin/row_host.h"
#include "kernels/twin/softmax.h"

namespace ampc::kernels::twin {
namespace {

namespace sh = kernels::shared;

// Value mixes: plain values; ties and signed zeros (which of equal values max keeps); special
// values (NaNs of several payloads and signs, infinities, zeros, subnormals, huge values); one
// NaN payload (a signalling NaN, quietened on the way) among zeros and subnormals; infinities of
// both signs without NaNs. The last two keep every NaN result's payload exact.
enum class Mix { kPlain, kTies, kSpecial, kOneNaN, kInfinities };
constexpr Mix kMixes[] = {Mix::kPlain, Mix::kTies, Mix::kSpecial, Mix::kOneNaN, Mix::kInfinities};

float from_u32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float special_value(uint32_t r, Mix mix) {
  static const uint32_t kSpecial[] = {
      0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0xffd54321u, 0x7f800001u, 0x7f800000u, 0xff800000u,
      0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x7f7fffffu, 0xff7fffffu, 0x42b20000u};
  static const uint32_t kOneNaN[] = {0xffa12345u, 0x00000000u, 0x80000000u, 0x80000001u};
  static const uint32_t kInfinities[] = {0x7f800000u, 0xff800000u, 0x7f7fffffu};
  switch (mix) {
    case Mix::kSpecial:
      return from_u32(kSpecial[r % 14]);
    case Mix::kOneNaN:
      return from_u32(kOneNaN[r % 4]);
    default:
      return from_u32(kInfinities[r % 3]);
  }
}

std::vector<float> random_row(int64_t n, uint32_t seed, Mix mix) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    const uint32_t r = s >> 8;
    float f = static_cast<float>(static_cast<int32_t>(r % 20001) - 10000) / 1000.0f;
    if (mix == Mix::kTies) f = (r % 3 == 0) ? (r % 2 ? 0.0f : -0.0f) : static_cast<float>(r % 4);
    const bool special = mix == Mix::kSpecial || mix == Mix::kOneNaN || mix == Mix::kInfinities;
    if (special && r % 16 == 0) f = special_value(r >> 4, mix);
    v[i] = f;
  }
  return v;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

bool same_bits(float a, float b) {
  return bits_of(a) == bits_of(b);
}

// The NaN payloads a row's sums can carry: its NaNs' (quietened) and, where it holds an
// infinity, x86's default NaN (inf - inf, or the shifted exp's inf - inf).
std::set<uint32_t> nan_payloads(const std::vector<float>& v) {
  std::set<uint32_t> p;
  for (float f : v) {
    if (std::isnan(f)) p.insert(bits_of(f) | 0x00400000u);
    if (std::isinf(f)) p.insert(0xffc00000u);
  }
  return p;
}

// got is want's bits, or, where want is a NaN and the row can carry two payloads, a NaN of
// one of them (any NaN where `any_nan`).
bool agrees(float got, float want, const std::set<uint32_t>& row_payloads, bool any_nan = false) {
  if (same_bits(got, want)) return true;
  if (row_payloads.size() < 2 || !std::isnan(want) || !std::isnan(got)) return false;
  return any_nan || row_payloads.count(bits_of(got)) > 0;
}

std::string hex(float f) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", bits_of(f));
  return buf;
}

// The kernels' reduction of v as row_reduce_host writes it.
template <typename Combine>
float reference_fold(sh::RowPlan plan, const std::vector<float>& v, float init, Combine combine) {
  return sh::row_reduce_host(
      plan, static_cast<int64_t>(v.size()), init,
      [&](float a, int64_t j) { return combine(a, v[j]); }, combine);
}

std::vector<int64_t> lengths() {
  std::vector<int64_t> n;
  for (int64_t i = 1; i <= 3000; ++i) n.push_back(i);
  for (int64_t i : {4092, 4096, 4100, 8191, 16380, 16383, 16384, 16385, 16388, 20000, 33333}) {
    n.push_back(i);
  }
  return n;
}

// fold_row (the AVX-512 form where the CPU has it) and fold_row_generic against the kernels'
// order, for a combine and its init, on the row's own plan and on forced plans.
template <typename Combine>
void expect_folds_match(const char* name, Combine combine, std::vector<float> inits) {
  constexpr bool kExact = std::is_same_v<Combine, MaxOf>;
  int failures = 0;
  for (int64_t n : lengths()) {
    for (Mix mix : kMixes) {
      const std::vector<float> v = random_row(n, static_cast<uint32_t>(n), mix);
      const std::set<uint32_t> payloads = kExact ? std::set<uint32_t>() : nan_payloads(v);
      std::vector<sh::RowPlan> plans = {sh::row_plan(n)};
      if (n % 61 == 0 || n < 40) {  // every plan on some lengths
        for (int t : {32, 256, 512}) {
          plans.push_back({t, 1});
          plans.push_back({t, 4});
        }
      }
      for (const sh::RowPlan plan : plans) {
        for (float init : inits) {
          const float want = reference_fold(plan, v, init, combine);
          const float got = fold_row(plan, v.data(), n, init, combine);
          const float generic = fold_row_generic(plan, v.data(), n, init, combine);
          if (!agrees(got, want, payloads) || !agrees(generic, want, payloads)) {
            ADD_FAILURE() << name << " n " << n << " mix " << static_cast<int>(mix) << " plan "
                          << plan.threads << "x" << plan.vec << " init " << hex(init) << ": got "
                          << hex(got) << ", generic " << hex(generic) << ", want " << hex(want);
            if (++failures == 10) return;
          }
        }
      }
    }
  }
}

TEST(RowFold, MaxMatchesTheKernelsOrder) {
  expect_folds_match("max", MaxOf(), {-INFINITY, -0.0f, 0.0f, NAN});
}

TEST(RowFold, SumMatchesTheKernelsOrder) {
  expect_folds_match("sum", SumOf(), {0.0f, -0.0f, 1.5f});
}

// Softmax / LogSoftmax of one f32 row as kernels/cuda/softmax.cu computes it.
std::vector<float> reference_softmax(const std::vector<float>& x, bool log_softmax) {
  const int64_t n = static_cast<int64_t>(x.size());
  const sh::RowPlan plan = sh::row_plan(n);
  const float m = reference_fold(plan, x, sh::kNegInf, sh::MaxCombine());
  const float s = sh::row_reduce_host(
      plan, n, 0.0f, [&](float a, int64_t j) { return sh::add(a, sh::exp_shifted(x[j], m)); },
      sh::SumCombine());
  std::vector<float> y(n);
  const float f = log_softmax ? sh::log_f(s) : sh::softmax_inv_sum(s);
  for (int64_t j = 0; j < n; ++j) {
    y[j] = log_softmax ? sh::log_softmax_value(x[j], m, f) : sh::softmax_value(x[j], m, f);
  }
  return y;
}

// Several rows of each length through the twin (rows split over threads where large), and
// the same in place.
TEST(RowFold, SoftmaxMatchesTheKernelsOrder) {
  constexpr int64_t kRows = 5;  // a block of 4 rows side by side, and one more
  int failures = 0;
  for (int64_t n : lengths()) {
    if (n > 700 && n % 7 != 0 && n <= 3000) continue;  // every short length, some longer
    for (Mix mix : kMixes) {
      std::vector<float> x;
      for (int64_t r = 0; r < kRows; ++r) {
        const std::vector<float> row = random_row(n, static_cast<uint32_t>(n * 7 + r), mix);
        x.insert(x.end(), row.begin(), row.end());
      }
      for (bool log : {false, true}) {
        std::vector<float> y(x.size()), in_place = x;
        softmax(DType::kFloat32, x.data(), y.data(), kRows, n, 1, log);
        softmax(DType::kFloat32, in_place.data(), in_place.data(), kRows, n, 1, log);
        for (int64_t r = 0; r < kRows && failures < 10; ++r) {
          const std::vector<float> row(x.begin() + r * n, x.begin() + (r + 1) * n);
          const std::vector<float> want = reference_softmax(row, log);
          // Two payloads: every output is NaN (the sum is); log_f may change the payload.
          const std::set<uint32_t> payloads = nan_payloads(row);
          for (int64_t j = 0; j < n; ++j) {
            const float got = y[r * n + j], got_in_place = in_place[r * n + j];
            if (!agrees(got, want[j], payloads, true) ||
                !agrees(got_in_place, want[j], payloads, true)) {
              ADD_FAILURE() << (log ? "LogSoftmax" : "Softmax") << " n " << n << " mix "
                            << static_cast<int>(mix) << " row " << r << " [" << j << "]: got "
                            << hex(got) << ", in place " << hex(got_in_place) << ", want "
                            << hex(want[j]);
              ++failures;
              break;
            }
          }
        }
      }
    }
  }
}

// row_softmax_stats (cross-entropy's and the 16-bit softmax's) on a bf16 row: its exp values,
// maximum and sum.
TEST(RowFold, SoftmaxStatsMatchTheKernelsOrder) {
  for (int64_t n : {1, 3, 31, 128, 129, 1000, 1024, 1030, 4096, 16388}) {
    for (Mix mix : kMixes) {
      std::vector<float> x = random_row(n, static_cast<uint32_t>(n), mix);
      for (float& f : x) f = sh::load_bf16(sh::round_bf16(f));  // bf16 values, as loaded
      std::vector<float> e(n);
      float m, s;
      row_softmax_stats(x.data(), n, e.data(), &m, &s);
      const sh::RowPlan plan = sh::row_plan(n);
      const float want_m = reference_fold(plan, x, sh::kNegInf, sh::MaxCombine());
      EXPECT_TRUE(same_bits(m, want_m)) << n << ": " << hex(m) << " vs " << hex(want_m);
      std::vector<float> want_e(n);
      for (int64_t j = 0; j < n; ++j) {
        want_e[j] = sh::exp_shifted(x[j], want_m);
        ASSERT_TRUE(same_bits(e[j], want_e[j])) << n << " [" << j << "]";
      }
      const float want_s = reference_fold(plan, want_e, 0.0f, sh::SumCombine());
      EXPECT_TRUE(agrees(s, want_s, nan_payloads(x)))
          << n << ": " << hex(s) << " vs " << hex(want_s);
    }
  }
}

// The column sums (the bias gradient's ReduceSum over rows): column_sums_avx512 and its bf16
// form against
// every column's rows added in order, as the CUDA column threads add them; widths that make
// every block size and masked tail, a row stride wider than the columns summed, and the
// accumulators' starting values kept (a segment adds to its partials).
TEST(RowFold, ColumnSumsAddEachColumnsRowsInOrder) {
  for (Mix mix : kMixes) {
    for (int64_t cols : {1, 15, 16, 17, 63, 64, 65, 100, 255, 256, 257, 300, 520}) {
      const int64_t rows = 37, stride = cols + 3;
      const std::vector<float> x = random_row(rows * stride, static_cast<uint32_t>(cols), mix);
      // bf16: the same values rounded to bf16 (their bits), widened exactly before each add.
      std::vector<uint16_t> bits(x.size());
      std::vector<float> widened(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        bits[i] = float_to_bf16(x[i]).bits;
        widened[i] = bf16_to_float(BFloat16{bits[i]});
      }
      for (bool bf16 : {false, true}) {
        const std::vector<float>& v = bf16 ? widened : x;
        std::vector<float> got = random_row(cols, 7, Mix::kPlain), want = got;
        const bool ran = bf16 ? column_sums_bf16_avx512(bits.data(), stride, rows, cols, got.data())
                              : column_sums_avx512(x.data(), stride, rows, cols, got.data());
        if (!ran) GTEST_SKIP() << "no AVX-512 (F, BW, VL) on this CPU";
        std::vector<float> column(rows + 1);
        for (int64_t j = 0; j < cols; ++j) {
          column[0] = want[j];
          for (int64_t r = 0; r < rows; ++r) {
            want[j] = sh::add(want[j], v[r * stride + j]);
            column[r + 1] = v[r * stride + j];
          }
          ASSERT_TRUE(agrees(got[j], want[j], nan_payloads(column)))
              << (bf16 ? "bf16" : "f32") << " cols " << cols << " column " << j << ": "
              << hex(got[j]) << " vs " << hex(want[j]);
        }
      }
    }
  }
}

}  // namespace
}  // namespace ampc::kernels::twin
