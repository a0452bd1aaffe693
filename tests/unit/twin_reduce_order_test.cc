// The reduction twin's host loops (kernels/twin/reduce.cc: rows reduced side by side, partials
// gathered in element order) against the CUDA kernels' order written out directly from the
// shared primitives: each row of a channel reduction [N, C, S] over N and S reduced as a block
// does (sh::row_reduce_host: the partition, then the tree), the rows' partials combined per
// channel in row order, then finished; and each row of a reduction over the last axis [R, S]
// (a spatial sum over small maps) reduced and finished so. Bit for bit, for every reduction
// kind and the float types, over short rows (most threads of the warp empty), row counts that
// are not a multiple of the rows reduced side by side, and rows of one or more rounds.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/half.h"
#include "kernels/shared/reduce_math.h"
#include "kernels/shared/rowwise_fp.h"
#include "kernels/shared/rowwise_tree.h"
#include "kernels/twin/reduce.h"

namespace ampc::kernels::twin {
namespace {

namespace sh = kernels::shared;

template <typename T>
std::vector<T> random_data(int64_t count, uint32_t seed, ReduceOp op) {
  std::vector<T> v(count);
  uint32_t s = seed;
  for (int64_t i = 0; i < count; ++i) {
    s = s * 1664525u + 1013904223u;
    float f = static_cast<float>(static_cast<int32_t>(s >> 8) % 20000) / 3000.0f;
    if (op == ReduceOp::kProd) f = 1.0f + f / 100.0f;
    if (op == ReduceOp::kLogSum) f = f < 0 ? -f + 0.1f : f + 0.1f;
    if (i % 97 == 5) f = -0.0f;  // signed zeros: the tree's +0 partials must not hide them
    v[i] = sh::Elem<T>::store(f);
  }
  return v;
}

// A block's reduction of row[0, s) in the kernels' order (unfinished).
template <typename T>
typename sh::Elem<T>::Math block_partial(ReduceOp op, const T* row, int64_t s) {
  using M = typename sh::Elem<T>::Math;
  return sh::row_reduce_host(
      sh::row_plan(s), s, sh::reduce_init<M>(op),
      [&](M acc, int64_t j) {
        return sh::reduce_accumulate(op, acc, M(sh::Elem<T>::load(row[j])));
      },
      [&](M u, M w) { return sh::reduce_combine(op, u, w); });
}

// The kernels' order, one row at a time.
template <typename T>
std::vector<T> reference(ReduceOp op, const std::vector<T>& x, int64_t n, int64_t c, int64_t s) {
  using M = typename sh::Elem<T>::Math;
  std::vector<T> y(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    M a = sh::reduce_init<M>(op);
    for (int64_t i = 0; i < n; ++i)
      a = sh::reduce_combine(op, a, block_partial(op, x.data() + (i * c + ch) * s, s));
    y[ch] = sh::Elem<T>::store(sh::reduce_finish(op, a, n * s));
  }
  return y;
}

template <typename T>
void check(DType dtype) {
  const int64_t shapes[][3] = {{32, 19, 1}, {32, 19, 2}, {5, 7, 3},    {32, 19, 4},
                               {9, 13, 16}, {4, 33, 64}, {3, 17, 196}, {2, 5, 700}};
  for (int op = 0; op < 9; ++op) {
    for (const auto& sh_ : shapes) {
      const int64_t n = sh_[0], c = sh_[1], s = sh_[2];
      const int64_t dims[3] = {n, c, s};
      const bool reduced[3] = {true, false, true};
      if (sh::segment_plan(n * c, s, 1).segments != 1) continue;  // one piece per row here
      const auto rop = static_cast<ReduceOp>(op);
      const std::vector<T> x = random_data<T>(n * c * s, 7 + op, rop);
      std::vector<T> got(c);
      std::vector<double> ws(reduce_workspace_bytes(rop, dtype, 3, dims, reduced) / 8 + 1);
      reduce(rop, dtype, x.data(), got.data(), 3, dims, reduced, ws.data());
      const std::vector<T> want = reference(rop, x, n, c, s);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), c * sizeof(T)), 0)
          << "op " << op << " " << dtype_name(dtype) << " [" << n << "," << c << "," << s << "]";
    }
  }
}

// Rows [R, S] reduced over S: each as a block reduces it, then finished.
template <typename T>
void check_rows(DType dtype) {
  const int64_t shapes[][2] = {{37, 1}, {37, 4}, {53, 7}, {16, 31}, {40, 127}, {9, 128}, {5, 700}};
  for (int op = 0; op < 9; ++op) {
    for (const auto& sh_ : shapes) {
      const int64_t r = sh_[0], s = sh_[1];
      const int64_t dims[2] = {r, s};
      const bool reduced[2] = {false, true};
      if (sh::segment_plan(r, s, 1).segments != 1) continue;  // one piece per row here
      const auto rop = static_cast<ReduceOp>(op);
      const std::vector<T> x = random_data<T>(r * s, 11 + op, rop);
      std::vector<T> got(r), want(r);
      std::vector<double> ws(reduce_workspace_bytes(rop, dtype, 2, dims, reduced) / 8 + 1);
      reduce(rop, dtype, x.data(), got.data(), 2, dims, reduced, ws.data());
      for (int64_t i = 0; i < r; ++i) {
        want[i] =
            sh::Elem<T>::store(sh::reduce_finish(rop, block_partial(rop, x.data() + i * s, s), s));
      }
      EXPECT_EQ(std::memcmp(got.data(), want.data(), r * sizeof(T)), 0)
          << "op " << op << " " << dtype_name(dtype) << " [" << r << "," << s << "]";
    }
  }
}

TEST(TwinReduceOrder, ChannelReductionsFollowTheKernelsOrderF32) {
  check<float>(DType::kFloat32);
}
TEST(TwinReduceOrder, ChannelReductionsFollowTheKernelsOrderBf16) {
  check<BFloat16>(DType::kBFloat16);
}
TEST(TwinReduceOrder, ChannelReductionsFollowTheKernelsOrderF16) {
  check<Half>(DType::kFloat16);
}
TEST(TwinReduceOrder, RowReductionsFollowTheKernelsOrder) {
  check_rows<float>(DType::kFloat32);
  check_rows<BFloat16>(DType::kBFloat16);
  check_rows<Half>(DType::kFloat16);
}

}  // namespace
}  // namespace ampc::kernels::twin
