// The AVX-512 loops of batchnorm_avx512.h. The build targets plain x86-64, so the vector
// functions carry target("avx512f,avx512bw,avx512vl") and run only where available() says so;
// the OpenMP loops that call them are base-target functions (an outlined parallel region would
// not carry the target), passing pointers only.
//
// The statistics emulate a block of kThreads threads per (channel, chunk): thread t adds the
// chunk's elements t, t + kThreads, ... in order. Three layouts hold the accumulators:
// - one channel at a time (channel_chunk): the 256 accumulators as 16 vectors, thread
//   16g + l in lane l of vector g. The chunk is read run by run (a run: the channel's values
//   in one image, contiguous); 16 consecutive elements go to 16 consecutive threads, so a
//   vector of them is added to one accumulator vector, or rotated across two where the run
//   does not start on a multiple of 16. The tree: whole vectors for s = 128 .. 16, shuffles
//   within the last one for s = 8 .. 1.
// - 64 channels per block of threads in memory order (block_group; one chunk per channel and
//   maps of 1, 2, 4 or 8 positions, as in mobilenet's and ResNet's last stages at 32x32): see
//   block_group.
// - sixteen channels side by side (lane_group; one chunk per channel and the other maps of
//   fewer than 16 positions): lane l holds channel ch0 + l, and element e of every channel
//   goes to accumulator vector e % kThreads; the sixteen planes of an image are read
//   contiguously, widened to f32, and each position gathered across them. The tree:
//   rowwise_tree.h's warp_tree_host_live on vectors.
// Either way every accumulator sees its elements' values in its thread's order, each value
// computed with batchnorm_math.h's operations (one rounding each, no FMA).
#include "kernels/twin/batchnorm_avx512.h"

#include <algorithm>
#include <vector>

#include "base/bf16_avx512.h"
#include "base/cpu_features.h"

namespace ampc::kernels::twin::bn_avx512 {
namespace {

namespace bn = shared::bn;
using avx512::first_lanes;
using avx512::lane_index;
using avx512::load;
using avx512::store;
using avx512::widen;

// Passes over fewer elements than this stay on one thread. Higher than batchnorm.cc's 1 << 16:
// the vector loops take about 1 ns per element for a whole forward or backward on one
// thread, and each parallel region costs 50-60 us under the passive wait
// (docs/architecture.md) for a training step's cold threads. mobilenet_v2 bf16 at 32x32 (its
// largest BatchNorm 786k elements), summed BatchNorm steps per step, one binary each way,
// alternated, minima of three: 13.3 ms with 1 << 16, 9.4 ms with 1 << 19; resnet18 4.6 -> 3.7.
constexpr int64_t kParallelWork = 1 << 19;
constexpr int kLanes = 16;
constexpr int kGroups = bn::kThreads / kLanes;  // accumulator vectors of one channel

constexpr int totals_of(Sums kind) {
  return kind == Sums::kGrad ? 3 : 1;
}

// The values an element adds, out[0 .. totals_of(kKind)), from x, dy and the channel's mean.
template <Sums kKind>
AMPC_AVX512BW_INLINE void element_values(__m512 x, __m512 g, __m512 m, __m512* out) {
  if constexpr (kKind == Sums::kSum) {
    out[0] = x;
  } else {
    const __m512 d = _mm512_sub_ps(x, m);
    out[0] = _mm512_mul_ps(d, d);
    if constexpr (kKind == Sums::kGrad) {
      out[1] = g;
      out[2] = _mm512_mul_ps(g, d);
    }
  }
}

// The block's tree over 256 thread values held 16 to a vector (acc[g], lane l: thread
// 16g + l); the total.
AMPC_AVX512BW_INLINE float vector_tree(__m512* acc) {
  for (int half = kGroups / 2; half > 0; half /= 2)
    for (int g = 0; g < half; ++g) acc[g] = _mm512_add_ps(acc[g], acc[g + half]);
  __m512 v = acc[0];
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));  // s = 8
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));  // s = 4
  v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));        // s = 2
  v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));        // s = 1
  return _mm512_cvtss_f32(v);
}

// Chunk [begin, end) of channel ch, one channel at a time: totals[k] for each of the kind's
// values.
template <Sums kKind, typename T>
AMPC_AVX512BW void channel_chunk(const T* x, const T* dy, int64_t ch, int64_t c, int64_t spatial,
                                 int64_t begin, int64_t end, float mean, float* totals) {
  constexpr int K = totals_of(kKind);
  __m512 acc[K][kGroups];
  for (int k = 0; k < K; ++k)
    for (int g = 0; g < kGroups; ++g) acc[k][g] = _mm512_setzero_ps();
  const __m512 m = _mm512_set1_ps(mean);
  const __m512i lane = lane_index();
  int p = 0;  // the thread of the next element
  int64_t e = begin, i = begin / spatial, j = begin - i * spatial;
  while (e < end) {
    const int64_t run = std::min(end - e, spatial - j);
    const int64_t base = (i * c + ch) * spatial + j;
    for (int64_t q = 0; q < run; q += kLanes) {
      const int len = static_cast<int>(std::min<int64_t>(kLanes, run - q));
      const __mmask16 live = first_lanes(len);
      __m512 v[K];
      __m512 g = _mm512_setzero_ps();
      if constexpr (kKind == Sums::kGrad) g = load(dy + base + q, live);
      element_values<kKind>(load(x + base + q, live), g, m, v);
      const int r = p % kLanes, at = p / kLanes;
      if (r == 0) {
        for (int k = 0; k < K; ++k)
          acc[k][at] = _mm512_mask_add_ps(acc[k][at], live, acc[k][at], v[k]);
      } else {
        // Element l goes to thread p + l: lane (r + l) % 16 of vector `at`, or of the next.
        const __m512i rotate = _mm512_and_si512(_mm512_sub_epi32(lane, _mm512_set1_epi32(r)),
                                                _mm512_set1_epi32(kLanes - 1));
        const auto bits = static_cast<unsigned>(live);
        const auto here = static_cast<__mmask16>((bits << r) & 0xffffu);
        const auto next = static_cast<__mmask16>(bits >> (kLanes - r));
        const int after = (at + 1) % kGroups;
        for (int k = 0; k < K; ++k) {
          const __m512 w = _mm512_permutexvar_ps(rotate, v[k]);
          acc[k][at] = _mm512_mask_add_ps(acc[k][at], here, acc[k][at], w);
          if (next) acc[k][after] = _mm512_mask_add_ps(acc[k][after], next, acc[k][after], w);
        }
      }
      p = (p + len) % bn::kThreads;
    }
    e += run;
    ++i;
    j = 0;
  }
  for (int k = 0; k < K; ++k) totals[k] = vector_tree(acc[k]);
}

// Channels ch0 .. ch0 + 15 (those below c) side by side, one chunk per channel (splits == 1,
// so thread e % kThreads takes element e), spatial < 16 and not a divisor of 16 (block_group
// takes those): parts[k][ch] for each.
template <Sums kKind, typename T>
AMPC_AVX512BW void lane_group(const T* x, const T* dy, int64_t n, int64_t c, int64_t spatial,
                              int64_t ch0, const float* means, float* const* parts) {
  constexpr int K = totals_of(kKind);
  const int64_t nl = std::min<int64_t>(kLanes, c - ch0);
  const __mmask16 lanes = first_lanes(nl);
  const __m512 m =
      kKind == Sums::kSum ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(lanes, means + ch0);
  const int64_t live = std::min<int64_t>(n * spatial, bn::kThreads);
  __m512 tile[K][bn::kThreads];
  for (int k = 0; k < K; ++k)
    for (int64_t t = 0; t < live; ++t) tile[k][t] = _mm512_setzero_ps();
  // Position j of plane l of the block is at l * spatial + j.
  const __m512i planes =
      _mm512_mullo_epi32(lane_index(), _mm512_set1_epi32(static_cast<int>(spatial)));
  alignas(64) float xs[kLanes * kLanes], gs[kLanes * kLanes];
  int64_t u = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t base = (i * c + ch0) * spatial;
    if (spatial > 1) {
      widen(x + base, nl * spatial, xs);
      if constexpr (kKind == Sums::kGrad) widen(dy + base, nl * spatial, gs);
    }
    for (int64_t j = 0; j < spatial; ++j) {
      __m512 xv, gv = _mm512_setzero_ps();
      if (spatial == 1) {
        xv = load(x + base, lanes);
        if constexpr (kKind == Sums::kGrad) gv = load(dy + base, lanes);
      } else {
        xv = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lanes, planes, xs + j, 4);
        if constexpr (kKind == Sums::kGrad)
          gv = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lanes, planes, gs + j, 4);
      }
      __m512 v[K];
      element_values<kKind>(xv, gv, m, v);
      for (int k = 0; k < K; ++k) tile[k][u] = _mm512_add_ps(tile[k][u], v[k]);
      u = u + 1 == bn::kThreads ? 0 : u + 1;
    }
  }
  // warp_tree_host_live on the vectors: threads from `live` on hold +0 (pairs of two are
  // skipped, the others added).
  for (int k = 0; k < K; ++k) {
    int64_t alive = live;
    for (int64_t off = bn::kThreads / 2; off > 0; off /= 2) {
      for (int64_t l = 0; l < off && l < alive; ++l)
        tile[k][l] =
            _mm512_add_ps(tile[k][l], l + off < alive ? tile[k][l + off] : _mm512_setzero_ps());
      alive = std::min(alive, off);
    }
    _mm512_mask_storeu_ps(parts[k] + ch0, lanes, tile[k][0]);
  }
}

// Channels per task of block_group: an image's values of them span whole cache lines.
constexpr int64_t kBlockChannels = 64;

// Channels ch0 .. ch0 + kBlockChannels - 1 (those below c), one chunk each (splits == 1), on
// maps of 1, 2, 4 or 8 positions: thread e % kThreads takes element e = i * spatial + j of a
// channel, so image i's values go to the threads of block b = i % (kThreads / spatial),
// position j to thread b * spatial + j. The accumulators hold block b's values in the image's
// own order (channel by channel, position by position): acc + (b * per_image + v) * 16 is
// vector v of them, so an image's planes (contiguous) are added with whole-vector loads and no
// transposes. acc: room for min(n, kThreads / spatial) * per_image vectors per value kind.
// The tree: its steps s >= spatial pair whole blocks; the last log2(spatial) pair positions
// within block 0, channel by channel.
template <Sums kKind, typename T>
AMPC_AVX512BW void block_group(const T* x, const T* dy, int64_t n, int64_t c, int64_t spatial,
                               int64_t ch0, const float* means, float* const* parts, float* acc) {
  constexpr int K = totals_of(kKind);
  const int64_t nc = std::min(kBlockChannels, c - ch0), width = nc * spatial;
  const int64_t per_image = (width + kLanes - 1) / kLanes;
  const int64_t blocks = bn::kThreads / spatial, used = std::min(n, blocks);
  const int64_t room = used * per_image * kLanes;                // floats per value kind
  alignas(64) float expanded[kBlockChannels * kLanes / 2] = {};  // each value's channel mean
  if (means)
    for (int64_t q = 0; q < width; ++q) expanded[q] = means[ch0 + q / spatial];
  std::fill(acc, acc + K * room, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = (i * c + ch0) * spatial, row = (i % blocks) * per_image * kLanes;
    for (int64_t v = 0; v < per_image; ++v) {
      const __mmask16 live = first_lanes(width - v * kLanes);
      __m512 g = _mm512_setzero_ps();
      if constexpr (kKind == Sums::kGrad) g = load(dy + at + v * kLanes, live);
      __m512 vals[K];
      element_values<kKind>(load(x + at + v * kLanes, live), g,
                            _mm512_load_ps(expanded + v * kLanes), vals);
      for (int k = 0; k < K; ++k) {
        float* a = acc + k * room + row + v * kLanes;
        _mm512_store_ps(a, _mm512_add_ps(_mm512_load_ps(a), vals[k]));
      }
    }
  }
  for (int k = 0; k < K; ++k) {
    float* base = acc + k * room;
    // warp_tree_host_live's steps s >= spatial on blocks: block b + s / spatial joins block b;
    // blocks from `alive` on hold +0, which an accumulator (never -0) keeps unchanged.
    int64_t alive = used;
    for (int64_t off = bn::kThreads / 2; off >= spatial; off /= 2) {
      const int64_t step = off / spatial;
      for (int64_t b = 0; b < step && b + step < alive; ++b) {
        float* to = base + b * per_image * kLanes;
        const float* from = base + (b + step) * per_image * kLanes;
        for (int64_t v = 0; v < per_image * kLanes; v += kLanes)
          _mm512_store_ps(to + v, _mm512_add_ps(_mm512_load_ps(to + v), _mm512_load_ps(from + v)));
      }
      alive = std::min(alive, step);
    }
    // The steps s < spatial within block 0, channel by channel.
    for (int64_t l = 0; l < nc; ++l) {
      float* t = base + l * spatial;
      for (int64_t off = spatial / 2; off > 0; off /= 2)
        for (int64_t j = 0; j < off; ++j) t[j] = t[j] + t[j + off];
      parts[k][ch0 + l] = t[0];
    }
  }
}

// How a pass cuts its work into tasks: groups of kBlockChannels channels (block_group), of
// kLanes channels (lane_group), or one chunk of one channel (channel_chunk).
enum class Layout { kBlocks, kLanes, kChunks };

Layout layout_of(int64_t c, int64_t spatial, int64_t splits) {
  if (splits != 1 || c < kLanes / 2 || spatial >= kLanes) return Layout::kChunks;
  return kLanes % spatial == 0 ? Layout::kBlocks : Layout::kLanes;
}

int64_t channels_per_task(Layout layout) {
  return layout == Layout::kBlocks ? kBlockChannels : layout == Layout::kLanes ? kLanes : 1;
}

// The floats of block_group's accumulators for one value kind.
int64_t block_room(int64_t n, int64_t spatial) {
  return std::min(n, bn::kThreads / spatial) * kBlockChannels * spatial;
}

// The work of one pass, or of both statistics passes, over a team of threads that all call
// share(): each thread gets its own 64-byte aligned block_group accumulators, then the tasks
// are shared out (an orphaned `omp for`; on one thread, all of them).
template <typename T>
struct Pass {
  const T *x, *dy;
  int64_t n, c, spatial, splits;
  Layout layout;

  int64_t tasks() const {
    return layout == Layout::kChunks
               ? c * splits
               : (c + channels_per_task(layout) - 1) / channels_per_task(layout);
  }

  template <Sums kKind>
  void task(int64_t t, const float* means, float* const* parts, float* acc) const {
    switch (layout) {
      case Layout::kBlocks:
        return block_group<kKind>(x, dy, n, c, spatial, t * kBlockChannels, means, parts, acc);
      case Layout::kLanes:
        return lane_group<kKind>(x, dy, n, c, spatial, t * kLanes, means, parts);
      case Layout::kChunks: {
        const int64_t ch = t / splits;
        int64_t begin, end;
        bn::chunk_range(n * spatial, splits, t % splits, &begin, &end);
        float totals[3];
        channel_chunk<kKind>(x, dy, ch, c, spatial, begin, end, means ? means[ch] : 0.0f, totals);
        for (int k = 0; k < totals_of(kKind); ++k) parts[k][t] = totals[k];
        return;
      }
    }
  }

  // Calls each(task, acc) for this thread's share of the tasks.
  template <typename Each>
  void share(Each each) const {
    std::vector<float> room(layout == Layout::kBlocks ? 3 * block_room(n, spatial) + kLanes : 0);
    float* acc =
        room.data() + (kLanes - reinterpret_cast<uintptr_t>(room.data()) / 4 % kLanes) % kLanes;
#pragma omp for
    for (int64_t t = 0; t < tasks(); ++t) each(t, acc);
  }

  bool parallel() const {
    return n * c * spatial > kParallelWork;
  }
};

template <Sums kKind, typename T>
void sums(const Pass<T>& pass, const float* means, float* const* parts) {
#pragma omp parallel if (pass.parallel())
  pass.share([&](int64_t t, float* acc) { pass.template task<kKind>(t, means, parts, acc); });
}

// The sums (part_sum), the channels' means, then the kSecond totals about them (parts). With
// one chunk per channel a task owns whole channels: it takes its channels' means from its own
// sums and runs the second pass while their data is in cache, in the same parallel region.
template <Sums kSecond, typename T>
void statistics(const Pass<T>& pass, float* part_sum, float* const* parts) {
  const int64_t count = pass.n * pass.spatial, splits = pass.splits;
  std::vector<float> means(static_cast<size_t>(pass.c));
  float* const sum_parts[1] = {part_sum};
  if (splits > 1) {
    sums<Sums::kSum>(pass, nullptr, sum_parts);
    for (int64_t ch = 0; ch < pass.c; ++ch)
      means[ch] = bn::combine_mean(part_sum + ch * splits, splits, count);
    return sums<kSecond>(pass, means.data(), parts);
  }
  const int64_t per_task = channels_per_task(pass.layout);
#pragma omp parallel if (pass.parallel())
  pass.share([&](int64_t t, float* acc) {
    pass.template task<Sums::kSum>(t, nullptr, sum_parts, acc);
    for (int64_t ch = t * per_task; ch < std::min(pass.c, (t + 1) * per_task); ++ch)
      means[ch] = bn::combine_mean(part_sum + ch, 1, count);
    pass.template task<kSecond>(t, means.data(), parts, acc);
  });
}

// The per-element maps, on coefficient vectors k[] of the element's channel.
struct AffineMap {
  static constexpr int kCoefficients = 2;  // a, b
  static constexpr bool kReadsDy = false;
  AMPC_AVX512BW_INLINE static __m512 apply(const __m512* k, __m512 x, __m512) {
    return _mm512_add_ps(_mm512_mul_ps(k[0], x), k[1]);
  }
};
struct DxMap {
  static constexpr int kCoefficients = 5;  // GradCoefficients' fields, in order
  static constexpr bool kReadsDy = true;
  AMPC_AVX512BW_INLINE static __m512 apply(const __m512* k, __m512 x, __m512 dy) {
    const __m512 xhat = _mm512_mul_ps(_mm512_sub_ps(x, k[0]), k[1]);
    return _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(dy, k[2]), _mm512_mul_ps(xhat, k[3])), k[4]);
  }
};

// y[0 .. len) = Map(x, dy) with one channel's coefficients k (scalars).
template <typename Map, typename T>
AMPC_AVX512BW void map_plane(const T* x, const T* dy, T* y, int64_t len, const float* k) {
  __m512 kv[Map::kCoefficients];
  for (int q = 0; q < Map::kCoefficients; ++q) kv[q] = _mm512_set1_ps(k[q]);
  for (int64_t q = 0; q < len; q += kLanes) {
    const __mmask16 live = first_lanes(len - q);
    __m512 g = _mm512_setzero_ps();
    if constexpr (Map::kReadsDy) g = load(dy + q, live);
    store(y + q, live, Map::apply(kv, load(x + q, live), g));
  }
}

// y[0 .. len) = Map(x, dy) with per-element coefficients k[q][0 .. len) (small maps: an
// image's channels expanded over their positions).
template <typename Map, typename T>
AMPC_AVX512BW void map_expanded(const T* x, const T* dy, T* y, int64_t len, const float* const* k) {
  for (int64_t q = 0; q < len; q += kLanes) {
    const __mmask16 live = first_lanes(len - q);
    __m512 kv[Map::kCoefficients];
    for (int r = 0; r < Map::kCoefficients; ++r) kv[r] = _mm512_maskz_loadu_ps(live, k[r] + q);
    __m512 g = _mm512_setzero_ps();
    if constexpr (Map::kReadsDy) g = load(dy + q, live);
    store(y + q, live, Map::apply(kv, load(x + q, live), g));
  }
}

// coefficient[q][ch]: the channels' coefficients. Planes of 16 positions and more run plane
// by plane; smaller ones image by image, over the coefficients expanded to every position.
template <typename Map, typename T>
void map(const T* x, const T* dy, T* y, int64_t n, int64_t c, int64_t spatial,
         const float* const* coefficient) {
  constexpr int C = Map::kCoefficients;
  const bool parallel = n * c * spatial > kParallelWork;
  if (spatial >= kLanes) {
#pragma omp parallel for if (parallel)
    for (int64_t plane = 0; plane < n * c; ++plane) {
      float k[C];
      for (int q = 0; q < C; ++q) k[q] = coefficient[q][plane % c];
      const int64_t at = plane * spatial;
      map_plane<Map>(x + at, Map::kReadsDy ? dy + at : nullptr, y + at, spatial, k);
    }
    return;
  }
  const int64_t image = c * spatial;
  std::vector<float> expanded(spatial > 1 ? static_cast<size_t>(C * image) : 0);
  const float* k[C];
  for (int q = 0; q < C; ++q) {
    k[q] = coefficient[q];  // one position: the channels' own
    if (spatial == 1) continue;
    float* row = expanded.data() + q * image;
    for (int64_t ch = 0; ch < c; ++ch) std::fill_n(row + ch * spatial, spatial, coefficient[q][ch]);
    k[q] = row;
  }
#pragma omp parallel for if (parallel)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = i * image;
    map_expanded<Map>(x + at, Map::kReadsDy ? dy + at : nullptr, y + at, image, k);
  }
}

// Channel ch's chunks: part_sum[ch * splits + s], then with its mean, the kSecond totals
// parts[k][ch * splits + s] (Pass::task's kChunks calls, in its order).
template <Sums kSecond, typename T>
void channel_statistics(const T* x, const T* dy, int64_t n, int64_t c, int64_t spatial,
                        int64_t splits, int64_t ch, float* part_sum, float* const* parts) {
  const int64_t count = n * spatial;
  float totals[3];
  for (int64_t s = 0; s < splits; ++s) {
    int64_t begin, end;
    bn::chunk_range(count, splits, s, &begin, &end);
    channel_chunk<Sums::kSum>(x, dy, ch, c, spatial, begin, end, 0.0f, totals);
    part_sum[ch * splits + s] = totals[0];
  }
  const float mean = bn::combine_mean(part_sum + ch * splits, splits, count);
  for (int64_t s = 0; s < splits; ++s) {
    int64_t begin, end;
    bn::chunk_range(count, splits, s, &begin, &end);
    channel_chunk<kSecond>(x, dy, ch, c, spatial, begin, end, mean, totals);
    for (int k = 0; k < totals_of(kSecond); ++k) parts[k][ch * splits + s] = totals[k];
  }
}

// Prefetches channels ch0 .. ch1 - 1 of x into the core's cache, image by image (each image's
// planes of them are contiguous), ahead of the passes that read them channel by channel.
template <typename T>
void fetch_channels(const T* x, int64_t n, int64_t c, int64_t spatial, int64_t ch0, int64_t ch1) {
  const int64_t len = (ch1 - ch0) * spatial * static_cast<int64_t>(sizeof(T));
  for (int64_t i = 0; i < n; ++i) {
    const char* p = reinterpret_cast<const char*>(x + (i * c + ch0) * spatial);
    for (int64_t b = 0; b < len; b += 64) _mm_prefetch(p + b, _MM_HINT_T1);
  }
}

// each(ch) for every channel, a group of channels per task: as many as keep their values of x
// (and dy, where not null) within 256 KiB, prefetched before each(ch) reads them.
template <typename T, typename Each>
void channel_groups(const T* x, const T* dy, int64_t n, int64_t c, int64_t spatial, Each each) {
  const int64_t bytes = n * spatial * static_cast<int64_t>(sizeof(T)) * (dy ? 2 : 1);
  const int64_t group = std::max<int64_t>(1, (int64_t{256} << 10) / bytes);
#pragma omp parallel for if (n * c * spatial > kParallelWork)
  for (int64_t ch0 = 0; ch0 < c; ch0 += group) {
    const int64_t ch1 = std::min(c, ch0 + group);
    fetch_channels(x, n, c, spatial, ch0, ch1);
    if (dy) fetch_channels(dy, n, c, spatial, ch0, ch1);
    for (int64_t ch = ch0; ch < ch1; ++ch) each(ch);
  }
}

// Channel ch's planes of y = Map(x, dy) with its coefficients k.
template <typename Map, typename T>
void channel_planes(const T* x, const T* dy, T* y, int64_t n, int64_t c, int64_t spatial,
                    int64_t ch, const float* k) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = (i * c + ch) * spatial;
    map_plane<Map>(x + at, Map::kReadsDy ? dy + at : nullptr, y + at, spatial, k);
  }
}

// The storage type's dispatch: f32, or bf16 as its bits.
template <typename F>
void on_storage(bool bf16, F&& f) {
  if (bf16) {
    f(uint16_t{});
  } else {
    f(float{});
  }
}

}  // namespace

bool available() {
  return cpu_has_avx512_bw_vl();
}

bool by_channel(int64_t n, int64_t c, int64_t spatial, int64_t splits, bool bf16, bool backward) {
  const int64_t bytes = n * spatial * (bf16 ? 2 : 4) * (backward ? 2 : 1);
  return (backward || splits > 1) && spatial >= kLanes && c >= 8 && bytes <= (int64_t{512} << 10);
}

void forward_by_channel(bool bf16, const void* x, int64_t n, int64_t c, int64_t spatial,
                        int64_t splits, float* part_sum, float* part_sq,
                        const std::function<void(int64_t)>& finish, const float* a, const float* b,
                        void* y) {
  on_storage(bf16, [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x);
    float* const parts[1] = {part_sq};
    channel_groups(xs, static_cast<const T*>(nullptr), n, c, spatial, [&](int64_t ch) {
      channel_statistics<Sums::kSqDev>(xs, xs, n, c, spatial, splits, ch, part_sum, parts);
      finish(ch);
      const float k[2] = {a[ch], b[ch]};
      channel_planes<AffineMap>(xs, xs, static_cast<T*>(y), n, c, spatial, ch, k);
    });
  });
}

void backward_by_channel(bool bf16, const void* x, const void* dy, int64_t n, int64_t c,
                         int64_t spatial, int64_t splits, float* part_sum, float* const parts[3],
                         const std::function<void(int64_t)>& finish,
                         const shared::bn::GradCoefficients<float>* g, void* dx) {
  on_storage(bf16, [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x);
    const T* dys = static_cast<const T*>(dy);
    channel_groups(xs, dys, n, c, spatial, [&](int64_t ch) {
      channel_statistics<Sums::kGrad>(xs, dys, n, c, spatial, splits, ch, part_sum, parts);
      finish(ch);
      if (!dx) return;
      // GradCoefficients' fields in order, as grad_dx lays them out.
      const float k[5] = {g[ch].mean, g[ch].inv, g[ch].mean_dy, g[ch].mean_dyxhat, g[ch].k};
      channel_planes<DxMap>(xs, dys, static_cast<T*>(dx), n, c, spatial, ch, k);
    });
  });
}

void statistics(Sums second, bool bf16, const void* x, const void* dy, int64_t n, int64_t c,
                int64_t spatial, int64_t splits, float* part_sum, float* const parts[3]) {
  on_storage(bf16, [&](auto tag) {
    using T = decltype(tag);
    const Pass<T> pass{
        static_cast<const T*>(x),     static_cast<const T*>(dy), n, c, spatial, splits,
        layout_of(c, spatial, splits)};
    if (second == Sums::kGrad) return statistics<Sums::kGrad>(pass, part_sum, parts);
    return statistics<Sums::kSqDev>(pass, part_sum, parts);
  });
}

void affine(bool bf16, const void* x, int64_t n, int64_t c, int64_t spatial, const float* a,
            const float* b, void* y) {
  const float* coefficient[2] = {a, b};
  on_storage(bf16, [&](auto tag) {
    using T = decltype(tag);
    map<AffineMap>(static_cast<const T*>(x), static_cast<const T*>(nullptr), static_cast<T*>(y), n,
                   c, spatial, coefficient);
  });
}

void grad_dx(bool bf16, const void* x, const void* dy, int64_t n, int64_t c, int64_t spatial,
             const shared::bn::GradCoefficients<float>* g, void* dx) {
  // The coefficients as five arrays (GradCoefficients' fields in order).
  std::vector<float> fields(static_cast<size_t>(5 * c));
  for (int64_t ch = 0; ch < c; ++ch) {
    const float v[5] = {g[ch].mean, g[ch].inv, g[ch].mean_dy, g[ch].mean_dyxhat, g[ch].k};
    for (int q = 0; q < 5; ++q) fields[q * c + ch] = v[q];
  }
  const float* coefficient[5];
  for (int q = 0; q < 5; ++q) coefficient[q] = fields.data() + q * c;
  on_storage(bf16, [&](auto tag) {
    using T = decltype(tag);
    map<DxMap>(static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), n, c,
               spatial, coefficient);
  });
}

}  // namespace ampc::kernels::twin::bn_avx512
