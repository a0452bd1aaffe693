// CPU twin of kernels/cuda/batchnorm.cu, and the CPU backend's BatchNormalization and its
// training-mode gradient: batchnorm_math.h's functions in the kernels' order (per channel and
// chunk: the block's thread sums and tree, then the chunks in order). Chunks, channels and
// planes are independent, so they run in parallel (OpenMP) without changing a bit.
// Where the CPU has AVX-512, f32 and bf16 data take batchnorm_avx512.h's vector loops instead,
// with the same bits (on maps of 16 positions and more, channels per task from their
// statistics to their output, so their values are read from memory once); the loops here run
// f16, f64, other CPUs and AMPC_NO_AVX512.
#include "kernels/twin/batchnorm.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/shared/batchnorm_layout.h"
#include "kernels/shared/batchnorm_math.h"
#include "kernels/shared/rowwise_tree.h"
#include "kernels/twin/batchnorm_avx512.h"

namespace ampc::kernels::twin {

namespace bn = ampc::kernels::shared::bn;

namespace {

// Loops over fewer elements than this stay on one thread.
constexpr int64_t kParallelWork = 1 << 16;

// batchnorm_avx512.h's loops serve f32 and bf16 data (kVectorType) on CPUs with AVX-512
// (vector_loops); the generic loops below run f16, f64 and CPUs without it.
template <typename T>
constexpr bool kVectorType = std::is_same_v<T, float> || std::is_same_v<T, BFloat16>;
template <typename T>
constexpr bool is_bf16 = std::is_same_v<T, BFloat16>;

bool vector_loops(int64_t n, int64_t c, int64_t spatial) {
  return n * c * spatial > 0 && bn_avx512::available();
}

// A chunk's total as the block computes it: thread values, then the tree (data_launch.cuh's
// block_tree_sum, which halves as a warp's tree does). Threads from `live` on took no element
// and hold +0: the pairs of two such values (+0 again) are not added, the others are, so a
// short chunk (a channel of a few values: small maps, the last stages of a CNN) does not pay
// for the whole tree.
template <typename M>
M plus(M a, M b) {
  return shared::add(a, b);
}

// kLanes channels' values side by side (lane_chunks), added lane by lane.
constexpr int kLanes = 16;

template <typename M>
struct Lanes {
  M l[kLanes];
};

template <typename M>
Lanes<M> plus(Lanes<M> a, const Lanes<M>& b) {
  for (int i = 0; i < kLanes; ++i) a.l[i] = shared::add(a.l[i], b.l[i]);
  return a;
}

// v's entries from `live` on need not be set; M() is +0 (in every lane).
template <typename M>
M tree(M* v, int64_t live) {
  return shared::warp_tree_host_live(v, bn::kThreads, live, M(),
                                     [](const M& a, const M& b) { return plus(a, b); });
}

// Threads of a chunk [begin, end) that take an element.
int64_t live_threads(int64_t begin, int64_t end) {
  return std::min<int64_t>(bn::kThreads, end - begin);
}

// step(t, flat index) for the elements of chunk [begin, end) of channel ch in increasing order,
// t being the thread that takes the element ((e - begin) % kThreads): each thread's order, x
// read run by run; a whole round of the threads over contiguous elements is one loop (it
// vectorises).
template <typename Step>
void walk_chunk(int64_t ch, int64_t c, int64_t spatial, int64_t begin, int64_t end, Step step) {
  int64_t e = begin, i = spatial ? begin / spatial : 0, j = begin - i * spatial;
  int t = 0;
  while (e < end) {
    const int64_t run = std::min(end - e, spatial - j);
    const int64_t base = (i * c + ch) * spatial + j;
    for (int64_t k = 0; k < run;) {
      if (t == 0 && run - k >= bn::kThreads) {
        for (int u = 0; u < bn::kThreads; ++u) step(u, base + k + u);
        k += bn::kThreads;
        continue;
      }
      step(t, base + k);
      ++k;
      if (++t == bn::kThreads) t = 0;
    }
    e += run;
    ++i;
    j = 0;
  }
}

// Chunk [begin, end) of channel ch: the block's thread values v[t] (thread t takes the chunk's
// elements t, t + kThreads, ... in order; bn::thread_sum, or with `centre` bn::thread_sq_dev
// about m). Walked in element order, each element going to its thread's accumulator, which
// keeps every thread's order while reading x contiguously.
template <bool kCentre, typename M, typename T>
void chunk_thread_values(const T* x, int64_t ch, int64_t c, int64_t spatial, int64_t begin,
                         int64_t end, M m, M* v) {
  std::fill(v, v + live_threads(begin, end), M(0));  // the others are not read (tree)
  auto step = [m](M acc, M value) {
    if constexpr (kCentre) {
      const M d = shared::sub(value, m);
      return shared::add(acc, shared::mul(d, d));
    } else {
      return shared::add(acc, value);
    }
  };
  if (spatial < bn::kThreads) {
    int64_t e = begin, i = spatial ? begin / spatial : 0, j = begin - i * spatial;
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
  walk_chunk(ch, c, spatial, begin, end,
             [&](int u, int64_t k) { v[u] = step(v[u], bn::b_load<M>(x, k)); });
}

// Elements of a lane block (lane_chunks): element e + q of every lane, at most this many at a time.
constexpr int64_t kLaneBlock = 128;

// block[k][q] = the k-th value of element e + q of the chunk in each lane (lane l: channel
// ch0 + l, spare lanes repeating the last channel), for q < the returned count. On maps of at
// least kLanes positions, a run within one image lane by lane (each lane reads its plane
// contiguously); on smaller maps, element by element across the lanes (neighbouring planes).
template <int K, typename M, typename Value>
int64_t fill_lane_block(int64_t c, int64_t spatial, int64_t ch0, int nl, int64_t e, int64_t end,
                        const Value& value, Lanes<M> (&block)[K][kLaneBlock]) {
  int64_t i = e / spatial, j = e - i * spatial;
  auto put = [&](int l, int64_t ch, int64_t q, int64_t at) {
    M v[K];
    value(ch, at, v);
    for (int k = 0; k < K; ++k) block[k][q].l[l] = v[k];
  };
  if (spatial >= kLanes) {
    const int64_t len = std::min({end - e, spatial - j, kLaneBlock});
    for (int l = 0; l < kLanes; ++l) {
      const int64_t ch = ch0 + std::min(l, nl - 1);
      const int64_t base = (i * c + ch) * spatial + j;
      for (int64_t q = 0; q < len; ++q) put(l, ch, q, base + q);
    }
    return len;
  }
  const int64_t len = std::min(end - e, kLaneBlock);
  for (int64_t q = 0; q < len; ++q) {
    for (int l = 0; l < kLanes; ++l) {
      const int64_t ch = ch0 + std::min(l, nl - 1);
      put(l, ch, q, (i * c + ch) * spatial + j);
    }
    if (++j == spatial) {
      j = 0;
      ++i;
    }
  }
  return len;
}

// The chunks of kLanes channels side by side: thread (e - begin) % kThreads taking element e of
// a chunk in increasing e (each thread's order), each step of the accumulation and of `tree` a
// vector operation across the channels, instead of a walk and a tree per channel and chunk
// (mobilenet's and ResNet's many channels of a few hundred values). value(ch, flat index,
// out[K]) gives an element's K values; parts[k][ch * splits + s] gets the k-th total of chunk
// s, the bits of chunk_thread_values' walk and tree. The values are computed a block at a time
// (fill_lane_block), then added to their threads' accumulators in element order.
template <int K, typename M, typename Value>
void lane_chunks(int64_t n, int64_t c, int64_t spatial, int64_t splits, Value value,
                 M* const (&parts)[K]) {
  const int64_t count = n * spatial, groups = (c + kLanes - 1) / kLanes;
#pragma omp parallel for if (n * c * spatial > kParallelWork)
  for (int64_t task = 0; task < groups * splits; ++task) {
    const int64_t ch0 = task / splits * kLanes, s = task % splits;
    const int nl = static_cast<int>(std::min<int64_t>(kLanes, c - ch0));
    int64_t begin, end;
    bn::chunk_range(count, splits, s, &begin, &end);
    Lanes<M> tile[K][bn::kThreads];  // tile[k][thread]
    Lanes<M> block[K][kLaneBlock];
    const int64_t live = live_threads(begin, end);
    for (int k = 0; k < K; ++k) std::fill(tile[k], tile[k] + live, Lanes<M>{});
    int u = 0;
    for (int64_t e = begin; e < end;) {
      const int64_t len = fill_lane_block<K>(c, spatial, ch0, nl, e, end, value, block);
      for (int64_t q = 0; q < len; ++q) {
        for (int k = 0; k < K; ++k) tile[k][u] = plus(tile[k][u], block[k][q]);
        u = u + 1 == bn::kThreads ? 0 : u + 1;
      }
      e += len;
    }
    for (int k = 0; k < K; ++k) {
      const Lanes<M> total = tree(tile[k], live);
      for (int l = 0; l < nl; ++l) parts[k][(ch0 + l) * splits + s] = total.l[l];
    }
  }
}

// Whether lane_chunks serves a shape: one chunk per channel (at most 4096 values, or many
// channels) and enough channels to fill most lanes. Channels of several chunks keep the
// per-channel walk, which reads each plane's run contiguously.
bool lanes(int64_t n, int64_t c, int64_t spatial, int64_t splits) {
  return splits == 1 && c >= kLanes / 2 && n * spatial > 0;
}

// The chunks' sums (part_sum, [c, splits]): the statistics' first pass.
template <typename M, typename T>
void sum_pass(const T* xs, int64_t n, int64_t c, int64_t spatial, int64_t splits, M* part_sum) {
  const int64_t count = n * spatial;
  if (lanes(n, c, spatial, splits)) {
    M* const parts[1] = {part_sum};
    lane_chunks<1>(
        n, c, spatial, splits, [xs](int64_t, int64_t k, M* out) { out[0] = bn::b_load<M>(xs, k); },
        parts);
    return;
  }
#pragma omp parallel for if (n * c * spatial > kParallelWork)
  for (int64_t task = 0; task < c * splits; ++task) {
    int64_t begin, end;
    bn::chunk_range(count, splits, task % splits, &begin, &end);
    M v[bn::kThreads];
    chunk_thread_values<false>(xs, task / splits, c, spatial, begin, end, M(0), v);
    part_sum[task] = tree(v, live_threads(begin, end));
  }
}

// Each channel's mean from the chunks' sums.
template <typename M>
std::vector<M> channel_means(const M* part_sum, int64_t c, int64_t splits, int64_t count) {
  std::vector<M> means(static_cast<size_t>(c));
  for (int64_t ch = 0; ch < c; ++ch)
    means[ch] = bn::combine_mean(part_sum + ch * splits, splits, count);
  return means;
}

// The chunks' sums (part_sum) and squared deviations from their channel's mean (part_sq),
// [c, splits] each: the statistics' two passes.
template <typename M, typename T>
void batch_statistics(const T* xs, int64_t n, int64_t c, int64_t spatial, int64_t splits,
                      M* part_sum, M* part_sq) {
  if constexpr (kVectorType<T>) {
    if (vector_loops(n, c, spatial)) {
      float* const parts[3] = {part_sq, nullptr, nullptr};
      return bn_avx512::statistics(bn_avx512::Sums::kSqDev, is_bf16<T>, xs, nullptr, n, c, spatial,
                                   splits, part_sum, parts);
    }
  }
  const int64_t count = n * spatial;
  sum_pass(xs, n, c, spatial, splits, part_sum);
  const std::vector<M> means = channel_means(part_sum, c, splits, count);
  if (lanes(n, c, spatial, splits)) {
    M* const parts[1] = {part_sq};
    lane_chunks<1>(
        n, c, spatial, splits,
        [xs, &means](int64_t ch, int64_t k, M* out) {
          const M d = shared::sub(bn::b_load<M>(xs, k), means[ch]);
          out[0] = shared::mul(d, d);
        },
        parts);
    return;
  }
#pragma omp parallel for if (n * c * spatial > kParallelWork)
  for (int64_t task = 0; task < c * splits; ++task) {
    const int64_t ch = task / splits;
    int64_t begin, end;
    bn::chunk_range(count, splits, task % splits, &begin, &end);
    M v[bn::kThreads];
    chunk_thread_values<true>(xs, ch, c, spatial, begin, end, means[ch], v);
    part_sq[task] = tree(v, live_threads(begin, end));
  }
}

// Chunk [begin, end) of channel ch: the block's thread sums of (x - m)^2 (q[t]), dy (a[t]) and
// dy * (x - m) (b[t]), thread t taking the chunk's elements t, t + kThreads, ... in order
// (bn::thread_grad_sums), walked in element order as chunk_thread_values walks them.
template <typename M, typename T>
void chunk_grad_values(const T* x, const T* dy, int64_t ch, int64_t c, int64_t spatial,
                       int64_t begin, int64_t end, M m, M* q, M* a, M* b) {
  const int64_t live = live_threads(begin, end);  // the others are not read (tree)
  std::fill(q, q + live, M(0));
  std::fill(a, a + live, M(0));
  std::fill(b, b + live, M(0));
  auto step = [&](int u, int64_t k) {
    const M d = shared::sub(bn::b_load<M>(x, k), m);
    const M g = bn::b_load<M>(dy, k);
    q[u] = shared::add(q[u], shared::mul(d, d));
    a[u] = shared::add(a[u], g);
    b[u] = shared::add(b[u], shared::mul(g, d));
  };
  walk_chunk(ch, c, spatial, begin, end, step);
}

// The chunks' squared deviations from their channel's mean and sums of dy and dy * (x - mean),
// [c, splits] each: the backward's second pass.
template <typename M, typename T>
void grad_sums_pass(const T* xs, const T* dys, int64_t n, int64_t c, int64_t spatial,
                    int64_t splits, const std::vector<M>& means, M* part_sq, M* part_dy,
                    M* part_dyx) {
  if (lanes(n, c, spatial, splits)) {
    M* const parts[3] = {part_sq, part_dy, part_dyx};
    lane_chunks<3>(
        n, c, spatial, splits,
        [xs, dys, &means](int64_t ch, int64_t k, M* out) {
          const M d = shared::sub(bn::b_load<M>(xs, k), means[ch]);
          const M g = bn::b_load<M>(dys, k);
          out[0] = shared::mul(d, d);
          out[1] = g;
          out[2] = shared::mul(g, d);
        },
        parts);
    return;
  }
  const int64_t count = n * spatial;
#pragma omp parallel for if (n * c * spatial > kParallelWork)
  for (int64_t task = 0; task < c * splits; ++task) {
    const int64_t ch = task / splits;
    int64_t begin, end;
    bn::chunk_range(count, splits, task % splits, &begin, &end);
    M vq[bn::kThreads], va[bn::kThreads], vb[bn::kThreads];
    chunk_grad_values(xs, dys, ch, c, spatial, begin, end, means[ch], vq, va, vb);
    const int64_t live = live_threads(begin, end);
    part_sq[task] = tree(vq, live);
    part_dy[task] = tree(va, live);
    part_dyx[task] = tree(vb, live);
  }
}

// The backward's statistics: the sums (part_sum), then the squared deviations and the
// gradient sums about the channels' means.
template <typename M, typename T>
void grad_statistics(const T* xs, const T* dys, int64_t n, int64_t c, int64_t spatial,
                     int64_t splits, M* part_sum, M* part_sq, M* part_dy, M* part_dyx) {
  if constexpr (kVectorType<T>) {
    if (vector_loops(n, c, spatial)) {
      float* const parts[3] = {part_sq, part_dy, part_dyx};
      return bn_avx512::statistics(bn_avx512::Sums::kGrad, is_bf16<T>, xs, dys, n, c, spatial,
                                   splits, part_sum, parts);
    }
  }
  sum_pass(xs, n, c, spatial, splits, part_sum);
  grad_sums_pass(xs, dys, n, c, spatial, splits, channel_means(part_sum, c, splits, n * spatial),
                 part_sq, part_dy, part_dyx);
}

// y = a[ch] * x + b[ch] over x [n, c, spatial], a plane per task.
template <typename M, typename T>
void apply_affine(const T* x, int64_t n, int64_t c, int64_t spatial, const M* a, const M* b, T* y) {
  if constexpr (kVectorType<T>) {
    if (vector_loops(n, c, spatial))
      return bn_avx512::affine(is_bf16<T>, x, n, c, spatial, a, b, y);
  }
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
    // Per channel: statistics, folded affine map, running statistics.
    auto finish = [&](int64_t ch) {
      bn::finish_channel<M>(ch, splits, count, part_sum, part_sq, static_cast<const P*>(scale),
                            static_cast<const P*>(bias), static_cast<const S*>(mean),
                            static_cast<const S*>(var), static_cast<M>(epsilon),
                            static_cast<M>(momentum), static_cast<S*>(running_mean_out),
                            static_cast<S*>(running_var_out), static_cast<S*>(saved_mean),
                            static_cast<S*>(saved_var), a + ch, b + ch);
    };
    if constexpr (kVectorType<T>) {
      if (vector_loops(n, c, spatial) &&
          bn_avx512::by_channel(n, c, spatial, splits, is_bf16<T>, false))
        return bn_avx512::forward_by_channel(is_bf16<T>, xs, n, c, spatial, splits, part_sum,
                                             part_sq, finish, a, b, y);
    }
    batch_statistics(xs, n, c, spatial, splits, part_sum, part_sq);
    for (int64_t ch = 0; ch < c; ++ch) finish(ch);
    apply_affine(xs, n, c, spatial, a, b, static_cast<T*>(y));
  });
}

void batch_norm_grad(DType x_dtype, DType param_dtype, const void* x, const void* dy, int64_t n,
                     int64_t c, int64_t spatial, const void* scale, float epsilon, void* dx,
                     void* dscale, void* dbias, void* workspace) {
  bn::visit_batch_norm(x_dtype, param_dtype, param_dtype, [&](auto xt, auto pt, auto) {
    using T = typename decltype(xt)::type;
    using P = typename decltype(pt)::type;
    using M = bn::MathOf<T>;
    const bn::GradWorkspace w = bn::grad_workspace_layout(n, c, spatial);
    const auto arrays = bn::grad_workspace_arrays<M>(workspace, w);
    const T* xs = static_cast<const T*>(x);
    const T* dys = static_cast<const T*>(dy);
    const int64_t count = n * spatial, splits = w.stats.splits;
    auto finish = [&](int64_t ch) {
      bn::finish_grad_channel<M>(ch, splits, count, arrays.part_sum, arrays.part_sq, arrays.part_dy,
                                 arrays.part_dyx, static_cast<const P*>(scale),
                                 static_cast<M>(epsilon), static_cast<P*>(dscale),
                                 static_cast<P*>(dbias), arrays.coefficients + ch);
    };
    if constexpr (kVectorType<T>) {
      if (vector_loops(n, c, spatial) &&
          bn_avx512::by_channel(n, c, spatial, splits, is_bf16<T>, true)) {
        float* const parts[3] = {arrays.part_sq, arrays.part_dy, arrays.part_dyx};
        return bn_avx512::backward_by_channel(is_bf16<T>, xs, dys, n, c, spatial, splits,
                                              arrays.part_sum, parts, finish, arrays.coefficients,
                                              dx);
      }
    }
    // The sums; then, in one walk, the squared deviations and the gradient sums.
    grad_statistics(xs, dys, n, c, spatial, splits, arrays.part_sum, arrays.part_sq, arrays.part_dy,
                    arrays.part_dyx);
    for (int64_t ch = 0; ch < c; ++ch) finish(ch);
    if (!dx) return;
    T* dxs = static_cast<T*>(dx);
    if constexpr (kVectorType<T>) {
      if (vector_loops(n, c, spatial))
        return bn_avx512::grad_dx(is_bf16<T>, xs, dys, n, c, spatial, arrays.coefficients, dxs);
    }
#pragma omp parallel for if (n * c * spatial > kParallelWork)
    for (int64_t plane = 0; plane < n * c; ++plane) {
      const bn::GradCoefficients<M> g = arrays.coefficients[plane % c];
      for (int64_t k = plane * spatial; k < (plane + 1) * spatial; ++k)
        bn::b_store(dxs, k, bn::grad_dx(g, bn::b_load<M>(xs, k), bn::b_load<M>(dys, k)));
    }
  });
}

}  // namespace ampc::kernels::twin
