// Per-output and per-input math of the pooling kernels (kernels/cuda/pool.cu) and their CPU
// twins (kernels/twin/pool.cc), compiled by nvcc and g++. Each function reproduces the order of
// operations of the CPU kernels (kernels/cpu/pool.cc, pool_grad.cc) for one output (forward)
// or one dx element (gradients), so that the results are the CPU op's bit for bit:
// - max without indices: pool_by_rows' order (each column of the window over dimensions 0 and
//   1 first, then along dimension 2), with `b > a ? b : a` (NaN never wins; the first of equal
//   values stays, which decides between -0 and +0);
// - max with indices: for_each_tap's order with `x > best || arg < 0` (the first maximum; a NaN
//   first tap stays);
// - average: the same column-then-row sums as pool_by_rows, divided by the divisor;
// - gradients: a dx element sums its shares over the windows that reach it in increasing
//   output order, which is the order in which the CPU kernels add them.
#pragma once

#include <cstdint>
#include <type_traits>

#include "base/half.h"
#include "kernels/shared/hd.h"
#include "kernels/shared/kernel_args.h"
#include "kernels/shared/rowwise_fp.h"

namespace ampc::kernels::shared::pool {

// The window geometry (the launch API's PoolGeometry, kernel_args.h: kernels::cpu::ConvGeom's
// fields), passed to kernels by value.
struct Geom : PoolGeometry {
  AMPC_HD int64_t image_size() const { return image[0] * image[1] * image[2]; }
  AMPC_HD int64_t cols_size() const { return cols[0] * cols[1] * cols[2]; }
};

// Storage type -> the type pooling compares and sums in (fp32 for 16-bit floats), and the
// identity of max (-inf for floats, the type's lowest for int8 / uint8, as the CPU kernel).
template <typename T>
struct PoolElem {
  using Math = T;
  AMPC_HD static T load(T v) { return v; }
  AMPC_HD static T store(T v) { return v; }
  AMPC_HD static T lowest() {
    if constexpr (std::is_same_v<T, float>) {
      return -__builtin_huge_valf();
    } else if constexpr (std::is_same_v<T, double>) {
      return -__builtin_huge_val();
    } else if constexpr (std::is_same_v<T, int8_t>) {
      return static_cast<int8_t>(-128);
    } else {
      static_assert(std::is_same_v<T, uint8_t>);
      return 0;
    }
  }
};
template <>
struct PoolElem<Half> {
  using Math = float;
  AMPC_HD static float load(Half v) { return shared::Elem<Half>::load(v); }
  AMPC_HD static Half store(float v) { return shared::Elem<Half>::store(v); }
  AMPC_HD static float lowest() { return -__builtin_huge_valf(); }
};
template <>
struct PoolElem<BFloat16> {
  using Math = float;
  AMPC_HD static float load(BFloat16 v) { return shared::Elem<BFloat16>::load(v); }
  AMPC_HD static BFloat16 store(float v) { return shared::Elem<BFloat16>::store(v); }
  AMPC_HD static float lowest() { return -__builtin_huge_valf(); }
};

// Correctly rounded sum and quotient whatever nvcc's flags (never contracted or approximated).
AMPC_HD float padd(float a, float b) {
  return add(a, b);
}
AMPC_HD double padd(double a, double b) {
  return add(a, b);
}
AMPC_HD float pdiv(float a, float b) {
  return div(a, b);
}
AMPC_HD double pdiv(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

// The taps t in [0, k) whose position start + t * dilation lies in [lo_bound, hi_bound).
AMPC_HD void tap_range(int64_t start, int64_t k, int64_t dilation, int64_t lo_bound,
                       int64_t hi_bound, int64_t* lo, int64_t* hi) {
  const int64_t l = start >= lo_bound ? 0 : (lo_bound - start + dilation - 1) / dilation;
  int64_t h = start < hi_bound ? (hi_bound - start + dilation - 1) / dilation : 0;
  if (h > k) h = k;
  *hi = h;
  *lo = l > h ? h : l;
}

// One output's window: its start and the taps inside the image, per dimension.
struct Window {
  int64_t start[3], lo[3], hi[3];
};

AMPC_HD Window window_at(const Geom& g, const int64_t (&o)[3]) {
  Window w;
  for (int d = 0; d < 3; ++d) {
    w.start[d] = o[d] * g.stride[d] - g.pad[d];
    tap_range(w.start[d], g.kernel[d], g.dilation[d], 0, g.image[d], &w.lo[d], &w.hi[d]);
  }
  return w;
}

// Output coordinates (o0, o1, o2) of the flat output index j within a plane.
AMPC_HD void output_coords(const Geom& g, int64_t j, int64_t (&o)[3]) {
  o[2] = j % g.cols[2];
  j /= g.cols[2];
  o[1] = j % g.cols[1];
  o[0] = j / g.cols[1];
}

template <typename M>
AMPC_HD M max_of(M a, M b) {
  return b > a ? b : a;
}

// Max over the window (pool_by_rows' order); xp is the plane.
template <typename T>
AMPC_HD typename PoolElem<T>::Math max_window(const Geom& g, const Window& w, const T* xp) {
  using E = PoolElem<T>;
  typename E::Math acc = E::lowest();
  for (int64_t t2 = w.lo[2]; t2 < w.hi[2]; ++t2) {
    const int64_t i2 = w.start[2] + t2 * g.dilation[2];
    typename E::Math column = E::lowest();
    for (int64_t t0 = w.lo[0]; t0 < w.hi[0]; ++t0) {
      const int64_t i0 = w.start[0] + t0 * g.dilation[0];
      for (int64_t t1 = w.lo[1]; t1 < w.hi[1]; ++t1) {
        const int64_t i1 = w.start[1] + t1 * g.dilation[1];
        column = max_of(column, E::load(xp[(i0 * g.image[1] + i1) * g.image[2] + i2]));
      }
    }
    acc = max_of(acc, column);
  }
  return acc;
}

// Max and the spatial offset of its first occurrence (for_each_tap's order); *arg is 0 for a
// window without taps (the CPU kernel's `if (arg < 0) arg = 0`).
template <typename T>
AMPC_HD typename PoolElem<T>::Math argmax_window(const Geom& g, const Window& w, const T* xp,
                                                 int64_t* arg) {
  using E = PoolElem<T>;
  typename E::Math best = E::lowest();
  int64_t a = -1;
  for (int64_t t0 = w.lo[0]; t0 < w.hi[0]; ++t0) {
    const int64_t i0 = w.start[0] + t0 * g.dilation[0];
    for (int64_t t1 = w.lo[1]; t1 < w.hi[1]; ++t1) {
      const int64_t row = (i0 * g.image[1] + w.start[1] + t1 * g.dilation[1]) * g.image[2];
      for (int64_t t2 = w.lo[2]; t2 < w.hi[2]; ++t2) {
        const int64_t off = row + w.start[2] + t2 * g.dilation[2];
        const typename E::Math v = E::load(xp[off]);
        if (v > best || a < 0) {
          best = v;
          a = off;
        }
      }
    }
  }
  *arg = a < 0 ? 0 : a;
  return best;
}

// A row-major spatial offset rewritten column-major (MaxPool's storage_order = 1).
AMPC_HD int64_t column_major_offset(const Geom& g, int64_t arg) {
  const int64_t i2 = arg % g.image[2], i1 = (arg / g.image[2]) % g.image[1];
  const int64_t i0 = arg / (g.image[2] * g.image[1]);
  return i0 + i1 * g.image[0] + i2 * g.image[0] * g.image[1];
}

// AveragePool's divisor of a window: its taps inside the image, or with count_include_pad
// also those in the padding (up to pad_end).
AMPC_HD int64_t window_count(const Geom& g, const Window& w, bool count_include_pad) {
  int64_t count = 1;
  for (int d = 0; d < 3; ++d) {
    int64_t lo = w.lo[d], hi = w.hi[d];
    if (count_include_pad) {
      tap_range(w.start[d], g.kernel[d], g.dilation[d], -g.pad[d], g.image[d] + g.pad_end[d], &lo,
                &hi);
    }
    count *= hi - lo;
  }
  return count;
}

// Mean over the window (pool_by_rows' sums: each column over dimensions 0 and 1, then along 2).
template <typename T>
AMPC_HD typename PoolElem<T>::Math average_window(const Geom& g, const Window& w, const T* xp,
                                                  bool count_include_pad) {
  using E = PoolElem<T>;
  using M = typename E::Math;
  M acc = M(0);
  for (int64_t t2 = w.lo[2]; t2 < w.hi[2]; ++t2) {
    const int64_t i2 = w.start[2] + t2 * g.dilation[2];
    M column = M(0);
    for (int64_t t0 = w.lo[0]; t0 < w.hi[0]; ++t0) {
      const int64_t i0 = w.start[0] + t0 * g.dilation[0];
      for (int64_t t1 = w.lo[1]; t1 < w.hi[1]; ++t1) {
        const int64_t i1 = w.start[1] + t1 * g.dilation[1];
        column = padd(column, E::load(xp[(i0 * g.image[1] + i1) * g.image[2] + i2]));
      }
    }
    acc = padd(acc, column);
  }
  const int64_t count = window_count(g, w, count_include_pad);
  return count > 0 ? pdiv(acc, static_cast<M>(count)) : M(0);
}

// The outputs [*lo, *hi] along one dimension whose window can reach image position i (a tap
// t in [0, k) with o * stride - pad + t * dilation == i still has to divide evenly).
AMPC_HD void reaching_outputs(const Geom& g, int d, int64_t i, int64_t* lo, int64_t* hi) {
  const int64_t top = i + g.pad[d];                                // o * stride <= top
  const int64_t bottom = top - (g.kernel[d] - 1) * g.dilation[d];  // o * stride >= bottom
  int64_t l = bottom <= 0 ? 0 : (bottom + g.stride[d] - 1) / g.stride[d];
  int64_t h = top < 0 ? -1 : top / g.stride[d];
  if (h > g.cols[d] - 1) h = g.cols[d] - 1;
  *lo = l;
  *hi = h;
}

AMPC_HD bool reaches(const Geom& g, int d, int64_t o, int64_t i) {
  return (i + g.pad[d] - o * g.stride[d]) % g.dilation[d] == 0;
}

// True when some output window has no tap inside the image (its dy goes to offset 0 in
// MaxPoolGrad, as the CPU kernel's indices say).
AMPC_HD bool has_empty_window(const Geom& g) {
  for (int d = 0; d < 3; ++d) {
    for (int64_t o = 0; o < g.cols[d]; ++o) {
      int64_t lo, hi;
      tap_range(o * g.stride[d] - g.pad[d], g.kernel[d], g.dilation[d], 0, g.image[d], &lo, &hi);
      if (lo == hi) return true;
    }
  }
  return false;
}

// MaxPoolGrad's dx at spatial offset `at` = (i0, i1, i2) of a plane: the sum, in increasing
// output order, of dy over the windows whose first maximum is `at`. With empty windows, offset
// 0 also receives theirs (in the same order). xp, dyp: the plane's x and dy.
template <typename T>
AMPC_HD typename PoolElem<T>::Math max_grad_at(const Geom& g, const T* xp, const T* dyp,
                                               const int64_t (&i)[3], bool empty_windows) {
  using E = PoolElem<T>;
  using M = typename E::Math;
  const int64_t at = (i[0] * g.image[1] + i[1]) * g.image[2] + i[2];
  M acc = M(0);
  int64_t lo[3], hi[3];
  if (empty_windows && at == 0) {
    for (int d = 0; d < 3; ++d) {
      lo[d] = 0;
      hi[d] = g.cols[d] - 1;
    }
  } else {
    for (int d = 0; d < 3; ++d) reaching_outputs(g, d, i[d], &lo[d], &hi[d]);
  }
  for (int64_t o0 = lo[0]; o0 <= hi[0]; ++o0) {
    for (int64_t o1 = lo[1]; o1 <= hi[1]; ++o1) {
      for (int64_t o2 = lo[2]; o2 <= hi[2]; ++o2) {
        const int64_t o[3] = {o0, o1, o2};
        const Window w = window_at(g, o);
        const bool empty = w.lo[0] == w.hi[0] || w.lo[1] == w.hi[1] || w.lo[2] == w.hi[2];
        if (!empty) {
          bool inside = true;
          for (int d = 0; d < 3; ++d) {
            const int64_t t = i[d] - w.start[d];
            inside = inside && t >= 0 && t <= (g.kernel[d] - 1) * g.dilation[d] &&
                     t % g.dilation[d] == 0;
          }
          if (!inside) continue;
          int64_t arg;
          argmax_window(g, w, xp, &arg);
          if (arg != at) continue;
        }
        acc = padd(acc, E::load(dyp[(o0 * g.cols[1] + o1) * g.cols[2] + o2]));
      }
    }
  }
  return acc;
}

// AveragePoolGrad's dx at (i0, i1, i2) of a plane: the sum, in increasing output order, of
// dy / divisor over the windows that reach it.
template <typename T>
AMPC_HD typename PoolElem<T>::Math average_grad_at(const Geom& g, const T* dyp,
                                                   const int64_t (&i)[3], bool count_include_pad) {
  using E = PoolElem<T>;
  using M = typename E::Math;
  M acc = M(0);
  int64_t lo[3], hi[3];
  for (int d = 0; d < 3; ++d) reaching_outputs(g, d, i[d], &lo[d], &hi[d]);
  for (int64_t o0 = lo[0]; o0 <= hi[0]; ++o0) {
    if (!reaches(g, 0, o0, i[0])) continue;
    for (int64_t o1 = lo[1]; o1 <= hi[1]; ++o1) {
      if (!reaches(g, 1, o1, i[1])) continue;
      for (int64_t o2 = lo[2]; o2 <= hi[2]; ++o2) {
        if (!reaches(g, 2, o2, i[2])) continue;
        const int64_t o[3] = {o0, o1, o2};
        const int64_t count = window_count(g, window_at(g, o), count_include_pad);
        if (count <= 0) continue;
        const M share =
            pdiv(E::load(dyp[(o0 * g.cols[1] + o1) * g.cols[2] + o2]), static_cast<M>(count));
        acc = padd(acc, share);
      }
    }
  }
  return acc;
}

// Image coordinates (i0, i1, i2) of the flat spatial offset k within a plane.
AMPC_HD void image_coords(const Geom& g, int64_t k, int64_t (&i)[3]) {
  i[2] = k % g.image[2];
  k /= g.image[2];
  i[1] = k % g.image[1];
  i[0] = k / g.image[1];
}

// GlobalAveragePool's block: kGlobalThreads threads, thread t sums elements t, t + threads,
// ... in order, then a tree (stride threads/2 down to 1: v[t] += v[t + stride]). The device
// kernel does the tree in shared memory and, below 32, with warp shuffles of the same pairs.
constexpr int kGlobalThreads = 256;

template <typename T>
AMPC_HD typename PoolElem<T>::Math thread_sum(const T* xp, int64_t spatial, int t) {
  using E = PoolElem<T>;
  typename E::Math acc(0);
  for (int64_t k = t; k < spatial; k += kGlobalThreads) acc = padd(acc, E::load(xp[k]));
  return acc;
}

// The plane's mean from the block's sum (the CPU kernel: sum / count, 0 for no elements).
template <typename M>
AMPC_HD M global_mean(M sum, int64_t spatial) {
  return spatial > 0 ? pdiv(sum, static_cast<M>(spatial)) : M(0);
}

}  // namespace ampc::kernels::shared::pool
