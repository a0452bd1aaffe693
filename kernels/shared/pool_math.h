// Per-output and per-input math of the pooling kernels (kernels/cuda/pool.cu) and their CPU
// twins (kernels/twin/pool.cc, which are also the CPU backend's pooling ops), compiled by nvcc
// and g++. Each function fixes the order of operations for one output (forward) or one dx
// element (gradients) (the order the CPU backend's own pooling kernels had):
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

// Storage type -> the type pooling compares and sums in (rowwise_fp.h's Elem: fp32 for 16-bit
// floats), and the identity of max (-inf for floats, the type's lowest for int8 / uint8, as
// the CPU kernel).
template <typename T>
struct PoolElem : Elem<T> {
  AMPC_HD static typename Elem<T>::Math lowest() {
    if constexpr (std::is_same_v<typename Elem<T>::Math, float>) {
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

// Sums and quotients go through rowwise_fp.h's add / div (float and double): correctly
// rounded whatever nvcc's flags (never contracted or approximated).

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

// G: Geom or kernels::cpu::ConvGeom (the CPU kernels call it too).
template <typename G>
AMPC_HD Window window_at(const G& g, const int64_t (&o)[3]) {
  Window w;
  for (int d = 0; d < 3; ++d) {
    w.start[d] = o[d] * g.stride[d] - g.pad[d];
    tap_range(w.start[d], g.kernel[d], g.dilation[d], 0, g.image[d], &w.lo[d], &w.hi[d]);
  }
  return w;
}

// The coordinates c of the flat row-major index k within a box of dims (a plane's outputs:
// g.cols; its image: g.image).
AMPC_HD void unflatten(const int64_t (&dims)[3], int64_t k, int64_t (&c)[3]) {
  c[2] = k % dims[2];
  k /= dims[2];
  c[1] = k % dims[1];
  c[0] = k / dims[1];
}

template <typename M>
AMPC_HD M max_of(M a, M b) {
  return b > a ? b : a;
}

// The window's values combined in pool_by_rows' order: each column over dimensions 0 and 1
// first (starting from init), then the columns along dimension 2 (from init too); xp is the
// plane.
template <typename T, typename Combine>
AMPC_HD typename PoolElem<T>::Math fold_window(const Geom& g, const Window& w, const T* xp,
                                               typename PoolElem<T>::Math init, Combine combine) {
  using E = PoolElem<T>;
  typename E::Math acc = init;
  for (int64_t t2 = w.lo[2]; t2 < w.hi[2]; ++t2) {
    const int64_t i2 = w.start[2] + t2 * g.dilation[2];
    typename E::Math column = init;
    for (int64_t t0 = w.lo[0]; t0 < w.hi[0]; ++t0) {
      const int64_t i0 = w.start[0] + t0 * g.dilation[0];
      for (int64_t t1 = w.lo[1]; t1 < w.hi[1]; ++t1) {
        const int64_t i1 = w.start[1] + t1 * g.dilation[1];
        column = combine(column, E::load(xp[(i0 * g.image[1] + i1) * g.image[2] + i2]));
      }
    }
    acc = combine(acc, column);
  }
  return acc;
}

// Max over the window.
template <typename T>
AMPC_HD typename PoolElem<T>::Math max_window(const Geom& g, const Window& w, const T* xp) {
  using M = typename PoolElem<T>::Math;
  return fold_window(g, w, xp, PoolElem<T>::lowest(), [](M a, M b) { return max_of(a, b); });
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

// A row-major spatial offset rewritten column-major (MaxPool's storage_order = 1). G: Geom or
// kernels::cpu::ConvGeom (the CPU kernel calls it too).
template <typename G>
AMPC_HD int64_t column_major_offset(const G& g, int64_t arg) {
  const int64_t i2 = arg % g.image[2], i1 = (arg / g.image[2]) % g.image[1];
  const int64_t i0 = arg / (g.image[2] * g.image[1]);
  return i0 + i1 * g.image[0] + i2 * g.image[0] * g.image[1];
}

// AveragePool's divisor of a window: its taps inside the image, or with count_include_pad
// also those in the padding (up to pad_end). G: Geom or kernels::cpu::ConvGeom.
template <typename G>
AMPC_HD int64_t window_count(const G& g, const Window& w, bool count_include_pad) {
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

// Mean over the window (fold_window's sums, divided by the divisor).
template <typename T>
AMPC_HD typename PoolElem<T>::Math average_window(const Geom& g, const Window& w, const T* xp,
                                                  bool count_include_pad) {
  using M = typename PoolElem<T>::Math;
  const M acc = fold_window(g, w, xp, M(0), [](M a, M b) { return add(a, b); });
  const int64_t count = window_count(g, w, count_include_pad);
  return count > 0 ? div(acc, static_cast<M>(count)) : M(0);
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
        acc = add(acc, E::load(dyp[(o0 * g.cols[1] + o1) * g.cols[2] + o2]));
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
            div(E::load(dyp[(o0 * g.cols[1] + o1) * g.cols[2] + o2]), static_cast<M>(count));
        acc = add(acc, share);
      }
    }
  }
  return acc;
}

// GlobalAveragePool's block: kGlobalThreads threads, thread t sums elements t, t + threads,
// ... in order, then a tree (stride threads/2 down to 1: v[t] += v[t + stride]). The device
// kernel does the tree in shared memory and, below 32, with warp shuffles of the same pairs.
constexpr int kGlobalThreads = 256;

template <typename T>
AMPC_HD typename PoolElem<T>::Math thread_sum(const T* xp, int64_t spatial, int t) {
  using E = PoolElem<T>;
  typename E::Math acc(0);
  for (int64_t k = t; k < spatial; k += kGlobalThreads) acc = add(acc, E::load(xp[k]));
  return acc;
}

// The plane's mean from the block's sum (the CPU kernel: sum / count, 0 for no elements).
template <typename M>
AMPC_HD M global_mean(M sum, int64_t spatial) {
  return spatial > 0 ? div(sum, static_cast<M>(spatial)) : M(0);
}

// ---- One flat index of a launch ----
// The kernels run one thread per index k (grid-stride), the twin a loop, both through the same
// operator() (pool_layout.h's run_pool / run_pool_grad).

// Output k of planes x outputs: MaxPool (y, and indices when not null) or, with kAverage,
// AveragePool.
template <typename T, bool kAverage>
struct PoolOutput {
  Geom g;
  const T* x;
  T* y;
  bool count_include_pad;  // AveragePool
  int64_t* indices;        // MaxPool: null for none
  bool column_major;       // MaxPool: indices in column-major order
  AMPC_HD void operator()(int64_t k) const {
    const int64_t img = g.image_size(), p = g.cols_size(), pl = k / p;
    int64_t o[3];
    unflatten(g.cols, k - pl * p, o);
    const Window w = window_at(g, o);
    if constexpr (kAverage) {
      y[k] = PoolElem<T>::store(average_window(g, w, x + pl * img, count_include_pad));
    } else if (!indices) {
      y[k] = PoolElem<T>::store(max_window(g, w, x + pl * img));
    } else {
      int64_t arg;
      y[k] = PoolElem<T>::store(argmax_window(g, w, x + pl * img, &arg));
      indices[k] = pl * img + (column_major ? column_major_offset(g, arg) : arg);
    }
  }
};

// dx element k of planes x image: MaxPoolGrad or, with kAverage, AveragePoolGrad.
template <typename T, bool kAverage>
struct PoolGradElement {
  Geom g;
  const T* dy;
  T* dx;
  bool count_include_pad;  // AveragePoolGrad
  const T* x;              // MaxPoolGrad: the forward input
  bool empty_windows;      // MaxPoolGrad: has_empty_window(g)
  AMPC_HD void operator()(int64_t k) const {
    const int64_t img = g.image_size(), p = g.cols_size(), pl = k / img;
    int64_t i[3];
    unflatten(g.image, k - pl * img, i);
    if constexpr (kAverage) {
      dx[k] = PoolElem<T>::store(average_grad_at(g, dy + pl * p, i, count_include_pad));
    } else {
      dx[k] = PoolElem<T>::store(max_grad_at(g, x + pl * img, dy + pl * p, i, empty_windows));
    }
  }
};

}  // namespace ampc::kernels::shared::pool
