// CPU twin of kernels/cuda/batchnorm.cu, and the CPU backend's BatchNormalization:
// batchnorm_math.h's functions in the kernels' order (per channel and chunk: the block's thread
// sums and tree, then the chunks in order). Chunks, channels and planes are independent, so
// they run in parallel (OpenMP) without changing a bit.
#include "kernels/twin/batchnorm.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/shared/batchnorm_layout.h"
#include "kernels/shared/batchnorm_math.h"
#include "kernels/shared/rowwise_tree.h"

namespace ampc::kernels::twin {

namespace bn = ampc::kernels::shared::bn;

namespace {

// Loops over fewer elements than this stay on one thread.
constexpr int64_t kParallelWork = 1 << 16;

// A chunk's total as the block computes it: thread values, then the tree (data_launch.cuh's
// block_tree_sum, which halves as a warp's tree does).
template <typename M>
M tree(M* v) {
  shared::warp_tree_host(v, bn::kThreads, [](M a, M b) { return shared::add(a, b); });
  return v[0];
}

// Chunk [begin, end) of channel ch: the block's thread values v[t] (thread t takes the chunk's
// elements t, t + kThreads, ... in order; bn::thread_sum, or with `centre` bn::thread_sq_dev
// about m). Walked in element order, each element going to its thread's accumulator, which
// keeps every thread's order while reading x contiguously.
template <bool kCentre, typename M, typename T>
void chunk_thread_values(const T* x, int64_t ch, int64_t c, int64_t spatial, int64_t begin,
                         int64_t end, M m, M* v) {
  std::fill(v, v + bn::kThreads, M(0));
  auto step = [m](M acc, M value) {
    if constexpr (kCentre) {
      const M d = shared::sub(value, m);
      return shared::add(acc, shared::mul(d, d));
    } else {
      return shared::add(acc, value);
    }
  };
  int64_t e = begin, i = spatial ? begin / spatial : 0, j = begin - i * spatial;
  if (spatial < bn::kThreads) {
    // Runs shorter than a round (small feature maps): the chunk's elements gathered in order
    // first, so that element begin + k still goes to thread k % kThreads, in whole rounds.
    thread_local std::vector<M> gathered;
    gathered.resize(static_cast<size_t>(end - begin));
    for (int64_t g = 0; e < end; ++i, j = 0) {
      const int64_t run = std::min(end - e, spatial - j);
      const T* p = x + (i * c + ch) * spatial + j;
      for (int64_t k = 0; k < run; ++k) gathered[g++] = bn::b_load<M>(p, k);
      e += run;
    }
    const int64_t len = end - begin;
    int64_t k = 0;
    for (; k + bn::kThreads <= len; k += bn::kThreads)
      for (int u = 0; u < bn::kThreads; ++u) v[u] = step(v[u], gathered[k + u]);
    for (int u = 0; k + u < len; ++u) v[u] = step(v[u], gathered[k + u]);
    return;
  }
  int t = 0;
  while (e < end) {
    const int64_t run = std::min(end - e, spatial - j);
    const T* p = x + (i * c + ch) * spatial + j;
    for (int64_t k = 0; k < run;) {
      if (t == 0 && run - k >= bn::kThreads) {  // a whole round of the threads: vectorises
        for (int u = 0; u < bn::kThreads; ++u) v[u] = step(v[u], bn::b_load<M>(p + k, u));
        k += bn::kThreads;
        continue;
      }
      v[t] = step(v[t], bn::b_load<M>(p, k));
      ++k;
      if (++t == bn::kThreads) t = 0;
    }
    e += run;
    ++i;
    j = 0;
  }
}

// y = a[ch] * x + b[ch] over x [n, c, spatial], a plane per task.
template <typename M, typename T>
void apply_affine(const T* x, int64_t n, int64_t c, int64_t spatial, const M* a, const M* b, T* y) {
#pragma omp parallel for if (n * c * spatial > kParallelWork)
  for (int64_t plane = 0; plane < n * c; ++plane) {
    const int64_t ch = plane % c, base = plane * spatial;
    const M av = a[ch], bv = b[ch];
    for (int64_t k = base; k < base + spatial; ++k)
      bn::b_store(y, k, bn::affine(av, bv, bn::b_load<M>(x, k)));
  }
}

}  // namespace

void batch_norm_inference(DType x_dtype, DType param_dtype, DType stat_dtype, const void* x,
                          int64_t n, int64_t c, int64_t spatial, const void* scale,
                          const void* bias, const void* mean, const void* var, float epsilon,
                          void* y) {
  bn::visit_batch_norm(x_dtype, param_dtype, stat_dtype, [&](auto xt, auto pt, auto st) {
    using T = typename decltype(xt)::type;
    using P = typename decltype(pt)::type;
    using S = typename decltype(st)::type;
    using M = bn::MathOf<T>;
    // The kernel folds per element; the fold depends on the channel only, so once per channel.
    std::vector<M> a(static_cast<size_t>(c)), b(static_cast<size_t>(c));
    for (int64_t ch = 0; ch < c; ++ch) {
      bn::fold_channel(ch, static_cast<const P*>(scale), static_cast<const P*>(bias),
                       static_cast<const S*>(mean), static_cast<const S*>(var),
                       static_cast<M>(epsilon), &a[ch], &b[ch]);
    }
    apply_affine(static_cast<const T*>(x), n, c, spatial, a.data(), b.data(), static_cast<T*>(y));
  });
}

void batch_norm_training(DType x_dtype, DType param_dtype, DType stat_dtype, const void* x,
                         int64_t n, int64_t c, int64_t spatial, const void* scale, const void* bias,
                         const void* mean, const void* var, float epsilon, float momentum, void* y,
                         void* running_mean_out, void* running_var_out, void* saved_mean,
                         void* saved_var, void* workspace) {
  bn::visit_batch_norm(x_dtype, param_dtype, stat_dtype, [&](auto xt, auto pt, auto st) {
    using T = typename decltype(xt)::type;
    using P = typename decltype(pt)::type;
    using S = typename decltype(st)::type;
    using M = bn::MathOf<T>;
    const bn::Workspace w = bn::workspace_layout(n, c, spatial);
    const auto [part_sum, part_sq, a, b] = bn::workspace_arrays<M>(workspace, w);
    const T* xs = static_cast<const T*>(x);
    const int64_t count = n * spatial, splits = w.splits;
    const bool par = n * c * spatial > kParallelWork;
    // Pass 1: the chunks' sums; pass 2: their squared deviations from the channel mean.
    for (int pass = 0; pass < 2; ++pass) {
      M* parts = pass == 0 ? part_sum : part_sq;
      std::vector<M> means(pass == 0 ? 0 : static_cast<size_t>(c));
      for (int64_t ch = 0; ch < static_cast<int64_t>(means.size()); ++ch)
        means[ch] = bn::combine_mean(part_sum + ch * splits, splits, count);
#pragma omp parallel for if (par)
      for (int64_t task = 0; task < c * splits; ++task) {
        const int64_t ch = task / splits;
        int64_t begin, end;
        bn::chunk_range(count, splits, task % splits, &begin, &end);
        M v[bn::kThreads];
        if (pass == 0) {
          chunk_thread_values<false>(xs, ch, c, spatial, begin, end, M(0), v);
        } else {
          chunk_thread_values<true>(xs, ch, c, spatial, begin, end, means[ch], v);
        }
        parts[task] = tree(v);
      }
    }
    // Per channel: statistics, folded affine map, running statistics; then y.
    for (int64_t ch = 0; ch < c; ++ch) {
      bn::finish_channel<M>(ch, splits, count, part_sum, part_sq, static_cast<const P*>(scale),
                            static_cast<const P*>(bias), static_cast<const S*>(mean),
                            static_cast<const S*>(var), static_cast<M>(epsilon),
                            static_cast<M>(momentum), static_cast<S*>(running_mean_out),
                            static_cast<S*>(running_var_out), static_cast<S*>(saved_mean),
                            static_cast<S*>(saved_var), a + ch, b + ch);
    }
    apply_affine(xs, n, c, spatial, a, b, static_cast<T*>(y));
  });
}

}  // namespace ampc::kernels::twin
