// The memory planner on hand-made problems (sharing, best fit, lower bound, alignment, in-place
// chains), a randomised property test against an independent check, and its speed on a
// training-shaped problem of 30,000 buffers.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "lower/memory_plan.h"

namespace ampc::lower {
namespace {

constexpr int64_t kA = kMemoryAlignment;

MemoryBuffer buf(int64_t bytes, int32_t first, int32_t last, std::vector<int32_t> share = {}) {
  return {bytes, first, last, std::move(share)};
}

bool overlap_in_time(const MemoryBuffer& a, const MemoryBuffer& b) {
  return a.first <= a.last && b.first <= b.last && a.first <= b.last && b.first <= a.last;
}

bool overlap_in_memory(int64_t a_off, int64_t a_bytes, int64_t b_off, int64_t b_bytes) {
  return a_bytes > 0 && b_bytes > 0 && a_off < b_off + b_bytes && b_off < a_off + a_bytes;
}

TEST(MemoryPlan, AlignUp) {
  EXPECT_EQ(align_up(0, 256), 0);
  EXPECT_EQ(align_up(1, 256), 256);
  EXPECT_EQ(align_up(256, 256), 256);
  EXPECT_EQ(align_up(257, 256), 512);
}

TEST(MemoryPlan, DisjointLifetimesShareStorage) {
  const auto r = plan_memory_offsets({buf(1000, 0, 1), buf(1000, 2, 3), buf(600, 4, 4)});
  EXPECT_EQ(r.offsets, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(r.arena_bytes, 1024);
  EXPECT_EQ(r.lower_bound_bytes, 1024);
}

TEST(MemoryPlan, OverlappingLifetimesNeverOverlapInMemory) {
  const std::vector<MemoryBuffer> b = {buf(1000, 0, 2), buf(3000, 1, 3), buf(500, 2, 4),
                                       buf(700, 3, 5)};
  const auto r = plan_memory_offsets(b);
  for (size_t i = 0; i < b.size(); ++i) {
    for (size_t j = i + 1; j < b.size(); ++j) {
      if (overlap_in_time(b[i], b[j])) {
        EXPECT_FALSE(overlap_in_memory(r.offsets[i], b[i].bytes, r.offsets[j], b[j].bytes))
            << i << " and " << j;
      }
    }
  }
  // Point 2: 1024 + 3072 + 512 live; point 3: 3072 + 512 + 768.
  EXPECT_EQ(r.lower_bound_bytes, 4608);
  EXPECT_EQ(r.peak_point, 2);
  EXPECT_GE(r.arena_bytes, r.lower_bound_bytes);
}

TEST(MemoryPlan, BestFitChoosesTheSmallestGap) {
  // Greedy by size: A (4 units) at 0, B (3) at 4, C (2) at 7, D (2) at 9, all live at point 0.
  // At point 1 only B [4,7) and D [9,11) stay: gaps [0,4) and [7,9). Z (2 units) takes the
  // smaller one, [7,9), where first fit would take 0; W (1 unit) then takes [0,1).
  const std::vector<MemoryBuffer> b = {buf(4 * kA, 0, 0), buf(3 * kA, 0, 1), buf(2 * kA, 0, 0),
                                       buf(2 * kA, 0, 1), buf(2 * kA, 1, 1), buf(kA, 1, 1)};
  const auto r = plan_memory_offsets(b);
  EXPECT_EQ(r.offsets, (std::vector<int64_t>{0, 4 * kA, 7 * kA, 9 * kA, 7 * kA, 0}));
  EXPECT_EQ(r.lower_bound_bytes, 11 * kA);  // point 0: 4 + 3 + 2 + 2
  EXPECT_EQ(r.peak_point, 0);
  EXPECT_EQ(r.arena_bytes, 11 * kA);
}

TEST(MemoryPlan, NoFittingGapPlacesAfterTheHighestOverlappingBuffer) {
  // Live at point 1: A (4 units), B (2), D (5); C (3) at points 2..3 overlaps D only.
  const std::vector<MemoryBuffer> b = {buf(4 * kA, 0, 1), buf(2 * kA, 1, 1), buf(3 * kA, 2, 3),
                                       buf(5 * kA, 1, 2)};
  const auto r = plan_memory_offsets(b);
  // Order: D (5), A (4), C (3), B (2). D at 0; A overlaps D: at 5; C overlaps D: at 5;
  // B overlaps D [0,5) and A [5,9): at 9.
  EXPECT_EQ(r.offsets, (std::vector<int64_t>{5 * kA, 9 * kA, 5 * kA, 0}));
  EXPECT_EQ(r.arena_bytes, 11 * kA);
  EXPECT_EQ(r.lower_bound_bytes, 11 * kA);  // point 1: 4 + 2 + 5
}

TEST(MemoryPlan, Alignment) {
  const std::vector<MemoryBuffer> b = {buf(1, 0, 1), buf(257, 0, 1), buf(3, 1, 1)};
  const auto r = plan_memory_offsets(b);
  for (int64_t off : r.offsets) EXPECT_EQ(off % kA, 0);
  EXPECT_EQ(r.lower_bound_bytes, 256 + 512 + 256);
  EXPECT_EQ(r.arena_bytes, 1024);
  const auto r64 = plan_memory_offsets(b, 64);
  for (int64_t off : r64.offsets) EXPECT_EQ(off % 64, 0);
  EXPECT_EQ(r64.lower_bound_bytes, 64 + 320 + 64);
}

TEST(MemoryPlan, NeverLiveAndEmptyBuffersTakeNoStorage) {
  const auto r = plan_memory_offsets({buf(1000, 0, 0), buf(5000, 3, 2), buf(0, 0, 0)});
  EXPECT_EQ(r.offsets, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(r.arena_bytes, 1024);
  EXPECT_EQ(r.lower_bound_bytes, 1024);
}

TEST(MemoryPlan, InPlaceChainSharesOneStorage) {
  // A -> B -> C, each written by the step that last reads the previous one.
  const std::vector<MemoryBuffer> b = {buf(1000, 0, 1), buf(1000, 1, 2, {0}), buf(1000, 2, 3, {1}),
                                       buf(1000, 0, 3)};
  const auto r = plan_memory_offsets(b);
  EXPECT_EQ(r.shared_with, (std::vector<int32_t>{-1, 0, 1, -1}));
  EXPECT_EQ(r.offsets[0], r.offsets[1]);
  EXPECT_EQ(r.offsets[1], r.offsets[2]);
  EXPECT_NE(r.offsets[0], r.offsets[3]);
  EXPECT_EQ(r.lower_bound_bytes, 2048);  // without sharing: 3072 at points 1 and 2
  EXPECT_EQ(r.arena_bytes, 2048);
}

TEST(MemoryPlan, InPlaceRefusals) {
  const std::vector<MemoryBuffer> b = {
      buf(1000, 0, 2),          // 0: A, last live at 2
      buf(1000, 1, 3, {0}),     // 1: A is still live after point 1: refused
      buf(2000, 2, 3, {0}),     // 2: larger than A: refused
      buf(1000, 2, 4, {0}),     // 3: takes A
      buf(1000, 2, 4, {0}),     // 4: A already taken by 3: refused
      buf(1000, 4, 5, {4, 3}),  // 5: 4 is still the tail of its storage, taken
  };
  const auto r = plan_memory_offsets(b);
  EXPECT_EQ(r.shared_with, (std::vector<int32_t>{-1, -1, -1, 0, -1, 4}));
  EXPECT_EQ(r.offsets[3], r.offsets[0]);
  EXPECT_EQ(r.offsets[5], r.offsets[4]);
}

TEST(MemoryPlan, RejectsNegativeSizes) {
  EXPECT_THROW(plan_memory_offsets({buf(-1, 0, 0)}), std::exception);
  EXPECT_THROW(plan_memory_offsets({buf(1, -1, 0)}), std::exception);
}

// For random lifetimes and in-place candidates: no two buffers live at the same point
// overlap in memory unless one took the other's storage, every offset is aligned, the arena
// holds every buffer, and the lower bound is the independently computed peak of live storage.
TEST(MemoryPlan, RandomProblemsAreSafeAndBounded) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 120);
    const int points = 1 + static_cast<int>(rng() % 60);
    std::vector<MemoryBuffer> b(n);
    for (int i = 0; i < n; ++i) {
      b[i].first = static_cast<int32_t>(rng() % points);
      b[i].last = b[i].first + static_cast<int32_t>(rng() % (rng() % 2 ? 3 : points));
      b[i].bytes = rng() % 8 == 0 ? 0 : 1 + static_cast<int64_t>(rng() % 5000);
      if (rng() % 10 == 0) b[i].last = b[i].first - 1;  // never live
      for (int j = 0; j < n; ++j) {
        if (j != i && b[j].last == b[i].first && rng() % 2) b[i].may_share.push_back(j);
      }
    }
    const auto r = plan_memory_offsets(b);
    ASSERT_EQ(r.offsets.size(), b.size());
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(r.offsets[i] % kA, 0);
      if (b[i].first <= b[i].last) {
        EXPECT_LE(r.offsets[i] + b[i].bytes, r.arena_bytes);
      }
      for (int j = i + 1; j < n; ++j) {
        if (!overlap_in_time(b[i], b[j]) ||
            !overlap_in_memory(r.offsets[i], b[i].bytes, r.offsets[j], b[j].bytes))
          continue;
        EXPECT_TRUE(r.shared_with[j] == i || r.shared_with[i] == j)
            << "trial " << trial << ": " << i << " and " << j;
      }
    }
    // Storage of an in-place chain: its head (whose aligned size bounds the others').
    std::vector<int> head(n);
    for (int i = 0; i < n; ++i) {
      head[i] = i;
      while (r.shared_with[head[i]] >= 0) head[i] = r.shared_with[head[i]];
      if (r.shared_with[i] >= 0) {
        const MemoryBuffer& x = b[r.shared_with[i]];
        EXPECT_EQ(x.last, b[i].first);
        EXPECT_LE(align_up(b[i].bytes, kA), align_up(b[head[i]].bytes, kA));
      }
    }
    int64_t bound = 0;
    for (int t = 0; t < points * 2; ++t) {
      std::vector<bool> counted(n, false);
      int64_t live = 0;
      for (int i = 0; i < n; ++i) {
        if (b[i].first <= t && t <= b[i].last && !counted[head[i]]) {
          counted[head[i]] = true;
          live += align_up(b[head[i]].bytes, kA);
        }
      }
      bound = std::max(bound, live);
    }
    EXPECT_EQ(r.lower_bound_bytes, bound) << "trial " << trial;
    EXPECT_GE(r.arena_bytes, r.lower_bound_bytes);
  }
}

// A training-shaped problem: forward activations kept for the backward, short-lived
// temporaries, gradients; 30,000 buffers in all. The time is printed, not checked (timings
// stay out of pass/fail tests): about 0.5 s on a loaded 2-core machine.
TEST(MemoryPlan, ThirtyThousandBuffersNearTheBound) {
  std::mt19937 rng(7);
  const int32_t forward = 10000;
  std::vector<MemoryBuffer> b;
  for (int32_t i = 0; i < forward; ++i) {
    const int64_t bytes = 1024 + static_cast<int64_t>(rng() % (4 << 20));
    const bool saved = rng() % 3 == 0;
    b.push_back(buf(bytes, i, saved ? 2 * forward - i : i + 1 + static_cast<int32_t>(rng() % 4)));
  }
  for (int32_t i = 0; i < forward; ++i) {
    const int32_t step = forward + i;
    const int64_t bytes = 1024 + static_cast<int64_t>(rng() % (4 << 20));
    b.push_back(buf(bytes, step, step + 1 + static_cast<int32_t>(rng() % 3)));
    b.push_back(buf(bytes, step, rng() % 4 == 0 ? 2 * forward + 1 : step + 1,
                    {static_cast<int32_t>(b.size() - 2)}));
  }
  const auto start = std::chrono::steady_clock::now();
  const auto r = plan_memory_offsets(b);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("30000 buffers: %.3f s, arena %lld B, lower bound %lld B, ratio %.3f\n", seconds,
              static_cast<long long>(r.arena_bytes), static_cast<long long>(r.lower_bound_bytes),
              static_cast<double>(r.arena_bytes) / static_cast<double>(r.lower_bound_bytes));
  EXPECT_GE(r.arena_bytes, r.lower_bound_bytes);
  // 1.14 measured: sizes drawn up to 4 MiB leave harder gaps than real plans, which the plan
  // tests hold to 1.10.
  EXPECT_LE(static_cast<double>(r.arena_bytes), 1.2 * static_cast<double>(r.lower_bound_bytes));
}

}  // namespace
}  // namespace ampc::lower
