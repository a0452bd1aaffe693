#include "kernels/cpu/conv_gemm.h"

#include <algorithm>
#include <array>
#include <type_traits>
#include <vector>

#include "base/half.h"
#include "kernels/cpu/dnnl_matmul.h"
#include "kernels/cpu/elementwise_types.h"

namespace ampc::kernels::cpu {
namespace {

// The active taps (see conv_gemm.h): per tap its flat kernel index and its image offset per
// spatial slot (image index = output index * stride + offset).
struct Taps {
  std::vector<int64_t> flat;
  std::vector<std::array<int64_t, 3>> offset;
  size_t size() const { return flat.size(); }
};

Taps active_taps(const ConvGeom& g) {
  std::array<std::vector<int64_t>, 3> active;  // per slot, the kernel indices that read the image
  for (int s = 0; s < 3; ++s) {
    for (int64_t k = 0; k < g.kernel[s]; ++k) {
      int64_t lo = 0, hi = 0;
      valid_cols(g.cols[s], g.image[s], g.stride[s], k * g.dilation[s] - g.pad[s], &lo, &hi);
      if (lo < hi) active[s].push_back(k);
    }
  }
  Taps t;
  for (int64_t k0 : active[0]) {
    for (int64_t k1 : active[1]) {
      for (int64_t k2 : active[2]) {
        t.flat.push_back((k0 * g.kernel[1] + k1) * g.kernel[2] + k2);
        const std::array<int64_t, 3> k = {k0, k1, k2};
        std::array<int64_t, 3> off{};
        for (int s = 0; s < 3; ++s) off[s] = k[s] * g.dilation[s] - g.pad[s];
        t.offset.push_back(off);
      }
    }
  }
  return t;
}

// Per-thread buffers kept between calls (the plan's shapes repeat every step).
template <typename T>
T* scratch(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Per output position p and active tap t (index p * taps + t): the image index the tap reads
// there, or -1 where it reads padding.
std::vector<int64_t> tap_pixels(const ConvGeom& g, const Taps& taps) {
  const int64_t p_size = g.cols_size(), nt = static_cast<int64_t>(taps.size());
  std::vector<int64_t> at(static_cast<size_t>(p_size * nt));
  for (int64_t p = 0; p < p_size; ++p) {
    const int64_t o2 = p % g.cols[2], o1 = (p / g.cols[2]) % g.cols[1],
                  o0 = p / (g.cols[2] * g.cols[1]);
    for (int64_t t = 0; t < nt; ++t) {
      const auto& off = taps.offset[static_cast<size_t>(t)];
      const int64_t i0 = o0 * g.stride[0] + off[0], i1 = o1 * g.stride[1] + off[1],
                    i2 = o2 * g.stride[2] + off[2];
      const bool inside =
          i0 >= 0 && i0 < g.image[0] && i1 >= 0 && i1 < g.image[1] && i2 >= 0 && i2 < g.image[2];
      at[static_cast<size_t>(p * nt + t)] = inside ? (i0 * g.image[1] + i1) * g.image[2] + i2 : -1;
    }
  }
  return at;
}

// rows [n * P, c * taps] from x [n, c, image] (zeros where a tap reads padding), or the adjoint:
// dx [n, c, image] (float, zeroed by the caller) += the scatter of drows.
template <typename T, typename Acc, bool kScatter>
void rows_pass(const ConvGeom& g, const Taps& taps, int64_t n, int64_t c, T* rows_or_image,
               Acc* image_or_rows) {
  const int64_t p_size = g.cols_size(), img = g.image_size(),
                nt = static_cast<int64_t>(taps.size());
  const int64_t width = c * nt;
  const std::vector<int64_t> at = tap_pixels(g, taps);
#pragma omp parallel for if (n * p_size * width > (1 << 18))
  for (int64_t ni = 0; ni < n; ++ni) {
    for (int64_t p = 0; p < p_size; ++p) {
      for (int64_t t = 0; t < nt; ++t) {
        const int64_t pixel = at[static_cast<size_t>(p * nt + t)];
        const int64_t row = (ni * p_size + p) * width + t;
        for (int64_t ci = 0; ci < c; ++ci) {
          const int64_t from = (ni * c + ci) * img + pixel;
          if constexpr (kScatter) {
            if (pixel >= 0) image_or_rows[from] += rows_or_image[row + ci * nt];
          } else {
            rows_or_image[row + ci * nt] = pixel >= 0 ? image_or_rows[from] : T{};
          }
        }
      }
    }
  }
}

// [n, a, b] -> [n, b, a], element for element.
template <typename T>
void swap_inner(const T* in, T* out, int64_t n, int64_t a, int64_t b) {
#pragma omp parallel for if (n * a * b > (1 << 18))
  for (int64_t ni = 0; ni < n; ++ni) {
    const T* src = in + ni * a * b;
    T* dst = out + ni * a * b;
    for (int64_t i = 0; i < a; ++i) {
      for (int64_t j = 0; j < b; ++j) dst[j * a + i] = src[i * b + j];
    }
  }
}

DnnlMatmul product(const ConvGemm& p, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                   int64_t lda, int64_t ldb, DType c_type) {
  DnnlMatmul mm;
  mm.a_type = mm.b_type = p.type;
  mm.c_type = c_type;
  mm.trans_a = trans_a;
  mm.trans_b = trans_b;
  mm.m = m;
  mm.n = n;
  mm.k = k;
  mm.lda = lda;
  mm.ldb = ldb;
  mm.ldc = n;
  return mm;
}

// W [m, c, kernel] restricted to the active taps: [m, c * taps]; w itself when every tap is.
template <typename T>
const T* active_weights(const ConvGemm& p, const Taps& taps, const T* w, std::vector<T>& buf) {
  const int64_t k = p.g.kernel_size(), nt = static_cast<int64_t>(taps.size());
  if (nt == k) return w;
  T* wa = scratch(buf, static_cast<size_t>(p.m * p.c * nt));
  // The gather reads every cache line of w (its taps are a few elements apart), so the whole
  // of w is the work that decides whether to split it.
#pragma omp parallel for if (p.m * p.c * k > (1 << 18))
  for (int64_t mc = 0; mc < p.m * p.c; ++mc) {
    for (int64_t t = 0; t < nt; ++t)
      wa[mc * nt + t] = w[mc * k + taps.flat[static_cast<size_t>(t)]];
  }
  return wa;
}

template <typename T>
bool forward(const ConvGemm& p, const T* x, const T* w, const T* bias, T* y) {
  const Taps taps = active_taps(p.g);
  const int64_t pp = p.g.cols_size(), r = p.n * pp, width = p.c * static_cast<int64_t>(taps.size());
  thread_local std::vector<T> rows_buf, w_buf, y_buf;
  T* rows = scratch(rows_buf, static_cast<size_t>(r * width));
  rows_pass<T, const T, false>(p.g, taps, p.n, p.c, rows, x);
  const T* wa = active_weights(p, taps, w, w_buf);
  // y_rows [r, m] = rows [r, width] . wa^T (+ bias per column), rounded once; it is y when the
  // maps are single positions, else y is its per-image transpose.
  T* y_rows = pp == 1 ? y : scratch(y_buf, static_cast<size_t>(r * p.m));
  DnnlMatmul mm = product(p, false, true, r, p.m, width, width, width, p.type);
  mm.bias = bias != nullptr;
  mm.bias_type = p.type;
  if (!dnnl_matmul(mm, rows, wa, bias, y_rows)) return false;
  if (pp != 1) swap_inner(y_rows, y, p.n, pp, p.m);
  return true;
}

// dy [n, m, P] as rows [n * P, m]: dy itself for single-position maps.
template <typename T>
const T* dy_rows(const ConvGemm& p, const T* dy, std::vector<T>& buf) {
  const int64_t pp = p.g.cols_size();
  if (pp == 1) return dy;
  T* out = scratch(buf, static_cast<size_t>(p.n * pp * p.m));
  swap_inner(dy, out, p.n, p.m, pp);
  return out;
}

// dy [n, m, P] as [m, n * P]: each image's rows of P positions copied as runs (an element
// transpose, dy_rows, costs more, and oneDNN's bf16 matmul reads a transposed A slower).
template <typename T>
void dy_by_channel(const ConvGemm& p, const T* dy, T* out) {
  const int64_t pp = p.g.cols_size(), r = p.n * pp;
#pragma omp parallel for if (p.m * r > (1 << 18))
  for (int64_t mi = 0; mi < p.m; ++mi) {
    for (int64_t ni = 0; ni < p.n; ++ni) {
      std::copy(dy + (ni * p.m + mi) * pp, dy + (ni * p.m + mi + 1) * pp, out + mi * r + ni * pp);
    }
  }
}

template <typename T>
bool backward_data(const ConvGemm& p, const T* dy, const T* w, T* dx) {
  const Taps taps = active_taps(p.g);
  const int64_t pp = p.g.cols_size(), r = p.n * pp, width = p.c * static_cast<int64_t>(taps.size());
  const int64_t dx_size = p.n * p.c * p.g.image_size();
  thread_local std::vector<T> dy_buf, w_buf;
  thread_local std::vector<float> drows_buf, acc_buf;
  const T* dyr = dy_rows(p, dy, dy_buf);
  const T* wa = active_weights(p, taps, w, w_buf);
  // drows [r, width] = dy_rows [r, m] . wa [m, width], in fp32: the taps' overlaps are summed
  // before the one rounding of dx.
  float* drows = scratch(drows_buf, static_cast<size_t>(r * width));
  if (!dnnl_matmul(product(p, false, false, r, width, p.m, p.m, width, DType::kFloat32), dyr, wa,
                   drows)) {
    return false;
  }
  float* acc = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    acc = dx;
  } else {
    acc = scratch(acc_buf, static_cast<size_t>(dx_size));
  }
  std::fill(acc, acc + dx_size, 0.0f);
  rows_pass<float, float, true>(p.g, taps, p.n, p.c, drows, acc);
  if constexpr (!std::is_same_v<T, float>) {
    for (int64_t i = 0; i < dx_size; ++i) dx[i] = store<T>(acc[i]);
  }
  return true;
}

// image [c, img] -> pixels [img, c], in square tiles: an element at a time across the whole
// image wrote each pixel's channels a plane apart, a cache line per element.
template <typename T>
void pixel_major(const T* image, int64_t c, int64_t img, T* pixels) {
  constexpr int64_t kTile = 16;
  for (int64_t c0 = 0; c0 < c; c0 += kTile) {
    const int64_t c1 = std::min(c, c0 + kTile);
    for (int64_t i0 = 0; i0 < img; i0 += kTile) {
      const int64_t i1 = std::min(img, i0 + kTile);
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t ci = c0; ci < c1; ++ci) pixels[i * c + ci] = image[ci * img + i];
      }
    }
  }
}

// The rows tap-major: rows [n * P, taps * c], row (ni, p) holding for each active tap t the c
// channels of the pixel it reads (zeros where it reads padding). Each image is first
// transposed to pixels x channels, so that a tap's c values are one contiguous copy: the
// channel-major rows_pass reads and writes one element at a time, at strides of a plane and of
// the tap count.
template <typename T>
void tap_major_rows(const ConvGeom& g, const Taps& taps, int64_t n, int64_t c, const T* x,
                    T* rows) {
  const int64_t p_size = g.cols_size(), img = g.image_size(),
                nt = static_cast<int64_t>(taps.size()), width = c * nt;
  const std::vector<int64_t> at = tap_pixels(g, taps);
#pragma omp parallel for if (n * p_size * width > (1 << 18))
  for (int64_t ni = 0; ni < n; ++ni) {
    thread_local std::vector<T> pixels_buf;
    T* pixels = scratch(pixels_buf, static_cast<size_t>(img * c));  // [img, c]
    pixel_major(x + ni * c * img, c, img, pixels);
    for (int64_t p = 0; p < p_size; ++p) {
      T* row = rows + (ni * p_size + p) * width;
      for (int64_t t = 0; t < nt; ++t) {
        const int64_t pixel = at[static_cast<size_t>(p * nt + t)];
        if (pixel < 0) {
          std::fill(row + t * c, row + (t + 1) * c, T{});
        } else {
          std::copy(pixels + pixel * c, pixels + (pixel + 1) * c, row + t * c);
        }
      }
    }
  }
}

// dw [m, c, kernel] from the active taps' gradient dwa [m, width] (T, or the fp32 sums that
// are rounded once here): zeros at the inactive taps, dwa's columns at the active ones, which
// are channel-major (c, t) or tap-major (t, c).
template <typename T, typename S>
void spread_weight_grad(const ConvGemm& p, const Taps& taps, const S* dwa, bool tap_major, T* dw) {
  const int64_t k = p.g.kernel_size(), nt = static_cast<int64_t>(taps.size()), width = p.c * nt;
  // dwa's column of (channel ci, tap t) is ci * c_step + t * t_step.
  const int64_t c_step = tap_major ? 1 : nt, t_step = tap_major ? p.c : 1;
#pragma omp parallel for if (p.m * p.c * k > (1 << 18))
  for (int64_t mi = 0; mi < p.m; ++mi) {
    T* rows = dw + mi * p.c * k;
    // Zeros first, in one run per output channel (a fill per row of k is a call per row).
    if (nt != k) std::fill(rows, rows + p.c * k, T{});
    for (int64_t t = 0; t < nt; ++t) {
      const int64_t tap = taps.flat[static_cast<size_t>(t)];
      const S* from = dwa + mi * width + t * t_step;
      if constexpr (std::is_same_v<S, T>) {
        for (int64_t ci = 0; ci < p.c; ++ci) rows[ci * k + tap] = from[ci * c_step];
      } else {
        for (int64_t ci = 0; ci < p.c; ++ci) rows[ci * k + tap] = store<T>(from[ci * c_step]);
      }
    }
  }
}

// db [m] += each channel's sum of dy^T [m, r] (or, transposed, dy [r, m]) in row order.
template <typename T>
void add_bias_grad(const ConvGemm& p, const T* dym, int64_t r, bool trans, float* sums) {
  for (int64_t mi = 0; mi < p.m; ++mi) {
    float sum = sums[mi];
    for (int64_t ri = 0; ri < r; ++ri) sum += load(trans ? dym[ri * p.m + mi] : dym[mi * r + ri]);
    sums[mi] = sum;
  }
}

template <typename T>
void store_bias_grad(const std::vector<float>& sums, T* db) {
  for (size_t i = 0; i < sums.size(); ++i) db[i] = store<T>(sums[i]);
}

// The weight gradient in one GEMM over every image's rows.
template <typename T>
bool weight_grad_whole(const ConvGemm& p, const Taps& taps, const T* dy, const T* x, T* dw, T* db) {
  const int64_t pp = p.g.cols_size(), r = p.n * pp, k = p.g.kernel_size();
  const int64_t nt = static_cast<int64_t>(taps.size()), width = p.c * nt;
  // More rows than output channels (the bf16 weight gradient's own rule): the rows are gathered
  // tap-major, and the gradient's columns are put back in W's order afterwards, a pass over
  // fewer elements than the rows have. Else channel-major, W's order already.
  const bool tap_major = r > p.m;
  thread_local std::vector<T> rows_buf, dy_buf, dw_buf;
  T* rows = scratch(rows_buf, static_cast<size_t>(r * width));
  if (tap_major) {
    tap_major_rows(p.g, taps, p.n, p.c, x, rows);
  } else {
    rows_pass<T, const T, false>(p.g, taps, p.n, p.c, rows, x);
  }
  // dy^T [m, r]: for single-position maps dy itself ([r, m]) read transposed, for one image dy
  // itself, else dy's channels copied into rows of r.
  const bool trans_a = pp == 1;
  const T* dym = dy;
  if (pp != 1 && p.n != 1) {
    T* out = scratch(dy_buf, static_cast<size_t>(p.m * r));
    dy_by_channel(p, dy, out);
    dym = out;
  }
  // dw_active [m, width] = dy^T [m, r] . rows [r, width], rounded once.
  const bool in_place = nt == k && !tap_major;
  T* dwa = in_place ? dw : scratch(dw_buf, static_cast<size_t>(p.m * width));
  if (!dnnl_matmul(product(p, trans_a, false, p.m, width, r, trans_a ? p.m : r, width, p.type), dym,
                   rows, dwa)) {
    return false;
  }
  if (!in_place) spread_weight_grad(p, taps, dwa, tap_major, dw);
  if (db) {
    std::vector<float> sums(static_cast<size_t>(p.m), 0.0f);
    add_bias_grad(p, dym, r, trans_a, sums.data());
    store_bias_grad(sums, db);
  }
  return true;
}

// The weight gradient of a problem whose rows would exceed kWeightGradMaxGathered elements: the
// images in chunks whose rows stay under it (one image at least), each chunk's product added
// to fp32 sums [m, width] (the first one writes them), which are rounded once at the end.
template <typename T>
bool weight_grad_chunked(const ConvGemm& p, const Taps& taps, const T* dy, const T* x, T* dw,
                         T* db) {
  const int64_t pp = p.g.cols_size(), img = p.g.image_size();
  const int64_t width = p.c * static_cast<int64_t>(taps.size());
  const int64_t per_chunk = std::max<int64_t>(1, kWeightGradMaxGathered / (pp * width));
  thread_local std::vector<T> rows_buf, dy_buf;
  thread_local std::vector<float> sums_buf;
  float* sums = scratch(sums_buf, static_cast<size_t>(p.m * width));
  std::vector<float> bias_sums(static_cast<size_t>(p.m), 0.0f);
  for (int64_t first = 0; first < p.n; first += per_chunk) {
    ConvGemm chunk = p;
    chunk.n = std::min(per_chunk, p.n - first);
    const int64_t r = chunk.n * pp;
    T* rows = scratch(rows_buf, static_cast<size_t>(r * width));
    tap_major_rows(p.g, taps, chunk.n, p.c, x + first * p.c * img, rows);
    T* dym = scratch(dy_buf, static_cast<size_t>(p.m * r));
    dy_by_channel(chunk, dy + first * p.m * pp, dym);
    DnnlMatmul mm = product(p, false, false, p.m, width, r, r, width, DType::kFloat32);
    mm.beta = first == 0 ? 0.0f : 1.0f;
    if (!dnnl_matmul(mm, dym, rows, sums)) return false;
    if (db) add_bias_grad(p, dym, r, false, bias_sums.data());
  }
  spread_weight_grad(p, taps, sums, true, dw);
  if (db) store_bias_grad(bias_sums, db);
  return true;
}

template <typename T>
bool backward_weights(const ConvGemm& p, const T* dy, const T* x, T* dw, T* db) {
  const Taps taps = active_taps(p.g);
  const int64_t width = p.c * static_cast<int64_t>(taps.size());
  // Only the bf16 rule (conv_gemm.h) reaches past kWeightGradMaxGathered rows by design; an
  // fp32 problem served for its weights keeps the one GEMM it always had.
  if (p.type == DType::kBFloat16 && p.n > 1 &&
      p.n * p.g.cols_size() * width > kWeightGradMaxGathered) {
    return weight_grad_chunked(p, taps, dy, x, dw, db);
  }
  return weight_grad_whole(p, taps, dy, x, dw, db);
}

}  // namespace

bool conv_gemm_serves(const ConvGemm& p, int64_t group) {
  const bool type_ok =
      p.type == DType::kFloat32 || (p.type == DType::kBFloat16 && dnnl_bf16_native());
  return group == 1 && type_ok && p.n * p.g.cols_size() <= p.m && p.n > 0 && p.c > 0 &&
         p.g.cols_size() > 0 && !active_taps(p.g).flat.empty();
}

bool conv_gemm_serves_weight_grad(const ConvGemm& p, int64_t group) {
  if (conv_gemm_serves(p, group)) return true;
  if (group != 1 || p.type != DType::kBFloat16 || !dnnl_bf16_native() || p.n <= 0 || p.c <= 0)
    return false;
  const int64_t taps = static_cast<int64_t>(active_taps(p.g).flat.size());
  const int64_t width = p.c * taps, per_image = p.g.cols_size() * width;
  if (per_image <= 0) return false;
  const bool small = width >= kWeightGradMinWidth && p.n * per_image <= kWeightGradMaxGathered;
  const bool chunked = (p.m >= kWeightGradMinOutputs || taps == 1) &&
                       (per_image <= kWeightGradMaxGathered || width >= kWeightGradChunkedMinWidth);
  return small || chunked;
}

bool conv_gemm_forward(const ConvGemm& p, const void* x, const void* w, const void* bias, void* y) {
  if (p.type == DType::kBFloat16) {
    return forward(p, static_cast<const BFloat16*>(x), static_cast<const BFloat16*>(w),
                   static_cast<const BFloat16*>(bias), static_cast<BFloat16*>(y));
  }
  return forward(p, static_cast<const float*>(x), static_cast<const float*>(w),
                 static_cast<const float*>(bias), static_cast<float*>(y));
}

bool conv_gemm_backward_data(const ConvGemm& p, const void* dy, const void* w, void* dx) {
  if (p.type == DType::kBFloat16) {
    return backward_data(p, static_cast<const BFloat16*>(dy), static_cast<const BFloat16*>(w),
                         static_cast<BFloat16*>(dx));
  }
  return backward_data(p, static_cast<const float*>(dy), static_cast<const float*>(w),
                       static_cast<float*>(dx));
}

bool conv_gemm_backward_weights(const ConvGemm& p, const void* dy, const void* x, void* dw,
                                void* db) {
  if (p.type == DType::kBFloat16) {
    return backward_weights(p, static_cast<const BFloat16*>(dy), static_cast<const BFloat16*>(x),
                            static_cast<BFloat16*>(dw), static_cast<BFloat16*>(db));
  }
  return backward_weights(p, static_cast<const float*>(dy), static_cast<const float*>(x),
                          static_cast<float*>(dw), static_cast<float*>(db));
}

}  // namespace ampc::kernels::cpu
