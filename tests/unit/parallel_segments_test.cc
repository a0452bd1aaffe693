// kernels/cpu/elementwise.h's parallel_segments: every element of every index space is
// visited exactly once, pieces stay inside their space, on one thread (small totals) and on
// several (large ones), with empty spaces and sizes around the chunk length.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "kernels/cpu/elementwise.h"

namespace ampc::kernels::cpu {
namespace {

void expect_each_once(const std::vector<int64_t>& sizes) {
  std::vector<std::vector<std::atomic<int>>> seen;
  for (int64_t n : sizes) seen.emplace_back(static_cast<size_t>(n));
  std::atomic<int> outside{0};
  parallel_segments(sizes, [&](int64_t s, int64_t begin, int64_t end) {
    if (s < 0 || s >= static_cast<int64_t>(sizes.size()) || begin < 0 || end > sizes[s] ||
        begin >= end) {
      ++outside;
      return;
    }
    for (int64_t i = begin; i < end; ++i) ++seen[static_cast<size_t>(s)][static_cast<size_t>(i)];
  });
  EXPECT_EQ(outside.load(), 0);
  for (size_t s = 0; s < sizes.size(); ++s) {
    for (size_t i = 0; i < seen[s].size(); ++i) {
      ASSERT_EQ(seen[s][i].load(), 1) << "space " << s << " element " << i;
    }
  }
}

TEST(ParallelSegments, SmallTotalOnOneThread) {
  expect_each_once({0, 1, 7, 8191, 8192, 8193, 0});
}

TEST(ParallelSegments, LargeTotalAcrossThreads) {
  expect_each_once({300000, 0, 1, 8192, 8193, 65536, 131071, 5, 250000});
}

TEST(ParallelSegments, NoSpaces) {
  expect_each_once({});
}

}  // namespace
}  // namespace ampc::kernels::cpu
