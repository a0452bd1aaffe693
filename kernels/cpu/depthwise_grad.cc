#include "kernels/cpu/depthwise_grad.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "base/bf16_convert.h"
#include "kernels/cpu/depthwise_avx512.h"

namespace ampc::kernels::cpu {
namespace {

inline float widen(float v) {
  return v;
}
inline double widen(double v) {
  return v;
}
inline float widen(BFloat16 v) {
  return bf16_to_float(v);
}

template <typename Acc>
void narrow(Acc v, Acc* out) {
  *out = v;
}
inline void narrow(float v, BFloat16* out) {
  *out = float_to_bf16(v);
}

// A run of output positions along the last dimension whose taps of kernel offset kk read
// the image: dy[dy_at + j] pairs with x[x_at + j * stride] for j < len. The runs depend on the
// geometry only, so they are listed once per call and walked for every image and channel
// (on MobileNet's 1x1 and 2x2 maps most taps read padding and a map has a few runs).
using Run = DepthwiseRun;

// Whether depthwise_avx512.h's loops take this call: f32 or bf16 rows of unit stride and at
// least 4 outputs on a CPU with AVX-512. On rows of 1 or 2 (MobileNet's last maps at 32x32)
// a vector does one or two products and the per-channel lanes cost more than they save:
// 960 channels of 1x1 0.36 ms against the portable loop's 0.12 ms (batch 32, bf16).
template <typename T>
bool vector_runs(const ConvGeom& g) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
    return g.stride[2] == 1 && g.cols[2] >= 4 && convert_avx512_available();
  } else {
    return false;
  }
}

// One image's and channel's runs on AVX-512: their products added to lanes[kk * 16 ..] and
// d[0 .. p) to bias[0 .. 16) (depthwise_avx512.h).
template <typename T>
void vector_sums(const T* d, const T* s, const std::vector<Run>& runs, float* lanes, int64_t p,
                 float* bias) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    depthwise_runs_avx512(reinterpret_cast<const uint16_t*>(d),
                          reinterpret_cast<const uint16_t*>(s), runs.data(),
                          static_cast<int64_t>(runs.size()), lanes, p, bias);
  } else {
    depthwise_runs_avx512(d, s, runs.data(), static_cast<int64_t>(runs.size()), lanes, p, bias);
  }
}

// Whether depthwise_avx512.h's channels-in-lanes loops take this call: f32 or bf16, one
// output channel per input channel, rows of fewer than 4 outputs, a CPU with AVX-512.
template <typename T>
bool vector_channels(const ConvGeom& g, int64_t c, int64_t m) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
    return m == c && g.cols[2] < 4 && convert_avx512_available();
  } else {
    return false;
  }
}

// The weight and bias gradients sixteen channels at a time (depthwise_channels_avx512).
template <typename T>
void channel_groups(const ConvGeom& g, const T* dy, const T* x, T* dw, T* db, int64_t n, int64_t m,
                    const std::vector<Run>& runs, bool parallel) {
  const int64_t k = g.kernel_size(), p = g.cols_size(), img = g.image_size();
  const DepthwiseChannels dc{n, m, p, img, k, g.stride[2]};
  using Bits = std::conditional_t<std::is_same_v<T, BFloat16>, uint16_t, float>;
  const Bits* dyb = reinterpret_cast<const Bits*>(dy);
  const Bits* xb = reinterpret_cast<const Bits*>(x);
#pragma omp parallel if (parallel)
  {
    std::vector<float> scratch(static_cast<size_t>(16 * (p + img + k))), w(16 * k), b(16);
#pragma omp for schedule(static)
    for (int64_t o0 = 0; o0 < m; o0 += 16) {
      const int64_t lanes = std::min<int64_t>(16, m - o0);
      depthwise_channels_avx512(dc, dyb, xb, runs.data(), static_cast<int64_t>(runs.size()), o0,
                                lanes, w.data(), db ? b.data() : nullptr, scratch.data());
      for (int64_t i = 0; i < lanes * k; ++i) narrow(w[i], dw + o0 * k + i);
      if (db)
        for (int64_t l = 0; l < lanes; ++l) narrow(b[l], db + o0 + l);
    }
  }
}

// The sum of 16 lanes.
float lane_total(const float* v) {
  float t = 0;
  for (int l = 0; l < 16; ++l) t += v[l];
  return t;
}

// The geometry's runs, kk by kk (the AVX-512 loops rely on a kk's runs being consecutive).
std::vector<Run> runs_of(const ConvGeom& g) {
  std::vector<Run> runs;
  const int64_t w = g.cols[2];
  for (int64_t kk = 0; kk < g.kernel_size(); ++kk) {
    const RowTaps t = row_taps(g, kk);
    if (t.hi <= t.lo) continue;
    for (int64_t o0 = 0; o0 < g.cols[0]; ++o0) {
      const int64_t i0 = o0 * g.stride[0] - g.pad[0] + t.k0 * g.dilation[0];
      if (i0 < 0 || i0 >= g.image[0]) continue;
      for (int64_t o1 = 0; o1 < g.cols[1]; ++o1) {
        const int64_t i1 = o1 * g.stride[1] - g.pad[1] + t.k1 * g.dilation[1];
        if (i1 < 0 || i1 >= g.image[1]) continue;
        runs.push_back({kk, (o0 * g.cols[1] + o1) * w + t.lo,
                        (i0 * g.image[1] + i1) * g.image[2] + t.off2 + t.lo * g.stride[2],
                        t.hi - t.lo});
      }
    }
  }
  return runs;
}

template <typename T, typename Acc>
void weight_grad(const ConvGeom& g, const T* dy, const T* x, T* dw, T* db, int64_t n, int64_t c,
                 int64_t m) {
  const int64_t k = g.kernel_size(), p = g.cols_size(), img = g.image_size();
  const int64_t per_group = m / c, s2 = g.stride[2];
  const std::vector<Run> runs = runs_of(g);
  const bool vectors = vector_runs<T>(g);
  int64_t taps = 0;
  for (const Run& r : runs) taps += r.len;
  const bool parallel = m * n * (taps + p) > (1 << 16);
  if constexpr (std::is_same_v<Acc, float>) {
    if (vector_channels<T>(g, c, m)) return channel_groups(g, dy, x, dw, db, n, m, runs, parallel);
  }
  // Channels are independent: each thread owns whole output channels, so every sum has one
  // order whatever the thread count.
#pragma omp parallel if (parallel)
  {
    std::vector<Acc> acc(static_cast<size_t>(k));
    std::vector<float> lanes(vectors ? static_cast<size_t>(k * 16 + 16) : 0);  // and the bias's
#pragma omp for schedule(static)
    for (int64_t o = 0; o < m; ++o) {
      std::fill(acc.begin(), acc.end(), Acc(0));
      Acc bias = 0;
      if constexpr (std::is_same_v<Acc, float>) {
        if (vectors) {
          std::fill(lanes.begin(), lanes.end(), 0.0f);
          for (int64_t b = 0; b < n; ++b)
            vector_sums(dy + (b * m + o) * p, x + (b * c + o / per_group) * img, runs, lanes.data(),
                        db ? p : 0, lanes.data() + k * 16);
          for (int64_t kk = 0; kk < k; ++kk) acc[kk] = lane_total(lanes.data() + kk * 16);
          bias = lane_total(lanes.data() + k * 16);
        }
      }
      for (int64_t b = 0; b < n && !vectors; ++b) {
        const T* d = dy + (b * m + o) * p;
        const T* s = x + (b * c + o / per_group) * img;
        for (const Run& r : runs) {
          Acc sum = 0;
#pragma omp simd reduction(+ : sum)
          for (int64_t j = 0; j < r.len; ++j)
            sum += widen(d[r.dy_at + j]) * widen(s[r.x_at + j * s2]);
          acc[r.kk] += sum;
        }
        if (db) {
          Acc sum = 0;
#pragma omp simd reduction(+ : sum)
          for (int64_t i = 0; i < p; ++i) sum += widen(d[i]);
          bias += sum;
        }
      }
      for (int64_t kk = 0; kk < k; ++kk) narrow(acc[kk], dw + o * k + kk);
      if (db) narrow(bias, db + o);
    }
  }
}

}  // namespace

void depthwise_weight_grad(const ConvGeom& g, const float* dy, const float* x, float* dw, float* db,
                           int64_t n, int64_t c, int64_t m) {
  weight_grad<float, float>(g, dy, x, dw, db, n, c, m);
}
void depthwise_weight_grad(const ConvGeom& g, const double* dy, const double* x, double* dw,
                           double* db, int64_t n, int64_t c, int64_t m) {
  weight_grad<double, double>(g, dy, x, dw, db, n, c, m);
}
void depthwise_weight_grad(const ConvGeom& g, const BFloat16* dy, const BFloat16* x, BFloat16* dw,
                           BFloat16* db, int64_t n, int64_t c, int64_t m) {
  weight_grad<BFloat16, float>(g, dy, x, dw, db, n, c, m);
}

}  // namespace ampc::kernels::cpu
