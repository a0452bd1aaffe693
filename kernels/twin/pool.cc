// CPU twin of kernels/cuda/pool.cu, and the CPU backend's MaxPool, AveragePool, their Global
// forms and gradients, in pool_math.h's order: MaxPool with indices and MaxPoolGrad find
// argmax_window's first maximum a row of outputs at a time (argmax_row; windows through
// per-dimension tables instead of the kernels' per-index divisions); MaxPool without indices
// and AveragePool fold_window's order a row at a time; the gradients scatter each output's
// share in increasing output order, which is the order in which the kernels' per-dx-element
// gathers (max_grad_at, average_grad_at) add them, so every dx element gets the same sum.
// GlobalAveragePool emulates the block reduction (thread sums, then the tree) on the lanes that
// hold elements (block_sum). Planes are independent: they run in parallel (OpenMP) without
// changing a bit. MaxPoolGrad on f32 and bf16 runs pool_avx512.h's gathers where the CPU has
// AVX-512.
#include "kernels/twin/pool.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "base/bf16_convert.h"
#include "kernels/shared/pool_layout.h"
#include "kernels/shared/pool_math.h"
#include "kernels/shared/rowwise_tree.h"
#include "kernels/twin/pool_avx512.h"

namespace ampc::kernels::twin {

namespace pm = ampc::kernels::shared::pool;

namespace {

// Loops over fewer elements than this stay on one thread.
constexpr int64_t kParallelWork = 1 << 16;

// Per dimension and output coordinate: the window's start and its taps inside the image
// (pm::window_at, computed once per coordinate).
struct WindowTable {
  std::vector<int64_t> start[3], lo[3], hi[3];
  explicit WindowTable(const pm::Geom& g) {
    for (int d = 0; d < 3; ++d) {
      for (int64_t o = 0; o < g.cols[d]; ++o) {
        int64_t l, h;
        const int64_t s = o * g.stride[d] - g.pad[d];
        pm::tap_range(s, g.kernel[d], g.dilation[d], 0, g.image[d], &l, &h);
        start[d].push_back(s);
        lo[d].push_back(l);
        hi[d].push_back(h);
      }
    }
  }
  pm::Window at(int64_t o0, int64_t o1, int64_t o2) const {
    const int64_t o[3] = {o0, o1, o2};
    pm::Window w;
    for (int d = 0; d < 3; ++d) {
      w.start[d] = start[d][o[d]];
      w.lo[d] = lo[d][o[d]];
      w.hi[d] = hi[d][o[d]];
    }
    return w;
  }
};

// out[0 .. n) = acc stored as T; bf16 16 lanes at a time where the CPU can (base/bf16_convert.h:
// half.h's rounding, the scalar store's bits), which the base x86-64 build leaves scalar.
template <typename M, typename T>
void store_plane(const M* acc, int64_t n, T* out) {
  if constexpr (std::is_same_v<T, BFloat16> && std::is_same_v<M, float>) {
    if (convert_avx512_available())
      return f32_to_bf16_avx512(acc, reinterpret_cast<uint16_t*>(out), n);
  }
  for (int64_t i = 0; i < n; ++i) out[i] = pm::PoolElem<T>::store(acc[i]);
}

// Calls tap(flat spatial offset) for every in-image tap of window w.
template <typename F>
void for_each_tap(const pm::Geom& g, const pm::Window& w, F&& tap) {
  for (int64_t t0 = w.lo[0]; t0 < w.hi[0]; ++t0) {
    const int64_t i0 = w.start[0] + t0 * g.dilation[0];
    for (int64_t t1 = w.lo[1]; t1 < w.hi[1]; ++t1) {
      const int64_t row = (i0 * g.image[1] + w.start[1] + t1 * g.dilation[1]) * g.image[2];
      for (int64_t t2 = w.lo[2]; t2 < w.hi[2]; ++t2) tap(row + w.start[2] + t2 * g.dilation[2]);
    }
  }
}

// The outputs [begin, end) along dimension 2 whose windows lie inside the image along it (every
// tap t2 reads the image): a row's interior, where argmax_row runs all outputs side by side.
struct Interior {
  int64_t begin = 0, end = 0;
};
Interior interior(const pm::Geom& g, const WindowTable& table) {
  Interior r;
  auto full = [&](int64_t o2) { return table.lo[2][o2] == 0 && table.hi[2][o2] == g.kernel[2]; };
  while (r.begin < g.cols[2] && !full(r.begin)) ++r.begin;
  r.end = r.begin;
  while (r.end < g.cols[2] && full(r.end)) ++r.end;
  return r;
}

// The first maximum of every window of one output row (o0, o1) of plane xp: value[o2] and
// arg[o2] (spatial offset, 0 for a window without taps) as pm::argmax_window gives them. The
// interior's outputs share their taps along dimensions 0 and 1 and each has all of its taps
// along 2, so the taps are visited in argmax_window's order for all of them at once: the first
// tap taken as it is (argmax_window's `arg < 0`), then each later one where it is greater,
// without a branch (which tap wins is data; a branch on it mispredicts), each output a chain
// of its own. The other outputs run argmax_window itself.
template <typename T>
void argmax_row(const pm::Geom& g, const WindowTable& table, const Interior& in, int64_t o0,
                int64_t o1, const T* xp, typename pm::PoolElem<T>::Math* value, int64_t* arg) {
  using E = pm::PoolElem<T>;
  using M = typename E::Math;
  const int64_t n2 = g.cols[2];
  for (int64_t o2 = 0; o2 < n2; ++o2) {
    if (o2 == in.begin && o2 < in.end) o2 = in.end;  // the interior is done below
    if (o2 == n2) break;
    value[o2] = pm::argmax_window(g, table.at(o0, o1, o2), xp, &arg[o2]);
  }
  if (in.begin == in.end) return;
  const pm::Window w = table.at(o0, o1, in.begin);
  if (w.lo[0] == w.hi[0] || w.lo[1] == w.hi[1]) {  // no taps: argmax_window's empty window
    for (int64_t o2 = in.begin; o2 < in.end; ++o2) {
      value[o2] = E::lowest();
      arg[o2] = 0;
    }
    return;
  }
  const int64_t* start2 = table.start[2].data();
  bool first = true;
  for (int64_t t0 = w.lo[0]; t0 < w.hi[0]; ++t0) {
    const int64_t i0 = w.start[0] + t0 * g.dilation[0];
    for (int64_t t1 = w.lo[1]; t1 < w.hi[1]; ++t1) {
      const int64_t row = (i0 * g.image[1] + w.start[1] + t1 * g.dilation[1]) * g.image[2];
      for (int64_t t2 = 0; t2 < g.kernel[2]; ++t2) {
        const int64_t tap = row + t2 * g.dilation[2];
        if (first) {
          for (int64_t o2 = in.begin; o2 < in.end; ++o2) {
            value[o2] = E::load(xp[tap + start2[o2]]);
            arg[o2] = tap + start2[o2];
          }
          first = false;
          continue;
        }
        for (int64_t o2 = in.begin; o2 < in.end; ++o2) {
          const int64_t off = tap + start2[o2];
          const M v = E::load(xp[off]), best = value[o2];
          // A mask, not `take ? off : arg`: GCC turns that pair of selects into a branch.
          const int64_t take = -static_cast<int64_t>(v > best);
          value[o2] = v > best ? v : best;
          arg[o2] = (off & take) | (arg[o2] & ~take);
        }
      }
    }
  }
}

// MaxPool without indices and AveragePool: pm::fold_window's order (each window column over
// dimensions 0 and 1, then the columns along dimension 2) for a whole output row at once: the
// window rows are combined element by element into one row of image[2] column values (a
// contiguous loop that vectorises), then each output folds its columns of that row.
// finish(acc, window) gives the output.
template <typename T, typename Combine, typename Finish>
void pool_by_rows(const pm::Geom& g, const T* x, int64_t planes, T* y,
                  typename pm::PoolElem<T>::Math init, Combine combine, Finish finish) {
  using E = pm::PoolElem<T>;
  using M = typename E::Math;
  const int64_t img = g.image_size(), p = g.cols_size(), width = g.image[2];
  const WindowTable table(g);
  // A 16-bit plane's outputs are kept in M and stored together (store_plane: bf16 rounded 16
  // lanes at a time), not each by the scalar store: that made bf16 MaxPool slower than fp32's.
  constexpr bool kBuffered = !std::is_same_v<T, M>;
#pragma omp parallel if (planes > 1 && planes * img >= kParallelWork)
  {
    std::vector<M> row(static_cast<size_t>(width));
    std::vector<M> plane_out(kBuffered ? static_cast<size_t>(p) : 0);
#pragma omp for
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* xp = x + pl * img;
      T* yp = y + pl * p;
      int64_t j = 0;  // the row's first output within the plane
      for (int64_t o0 = 0; o0 < g.cols[0]; ++o0) {
        for (int64_t o1 = 0; o1 < g.cols[1]; ++o1, yp += g.cols[2], j += g.cols[2]) {
          const pm::Window w = table.at(o0, o1, 0);
          std::fill(row.begin(), row.end(), init);
          for (int64_t t0 = w.lo[0]; t0 < w.hi[0]; ++t0) {
            const int64_t i0 = w.start[0] + t0 * g.dilation[0];
            for (int64_t t1 = w.lo[1]; t1 < w.hi[1]; ++t1) {
              const T* src = xp + (i0 * g.image[1] + w.start[1] + t1 * g.dilation[1]) * width;
              for (int64_t i = 0; i < width; ++i) row[i] = combine(row[i], E::load(src[i]));
            }
          }
          for (int64_t o2 = 0; o2 < g.cols[2]; ++o2) {
            const pm::Window wo = table.at(o0, o1, o2);
            M acc = init;
            for (int64_t t2 = wo.lo[2]; t2 < wo.hi[2]; ++t2)
              acc = combine(acc, row[wo.start[2] + t2 * g.dilation[2]]);
            if constexpr (kBuffered) {
              plane_out[static_cast<size_t>(j + o2)] = finish(acc, wo);
            } else {
              yp[o2] = E::store(finish(acc, wo));
            }
          }
        }
      }
      if constexpr (kBuffered) store_plane(plane_out.data(), p, y + pl * p);
    }
  }
}

}  // namespace

void max_pool(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* x, void* y,
              int64_t* indices, bool column_major) {
  const pm::Geom g = pm::to_geom(geometry);
  pm::visit_pool_type<true>(dtype, "max_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    using M = typename pm::PoolElem<T>::Math;
    if (!indices) {
      return pool_by_rows(
          g, xs, planes, ys, pm::PoolElem<T>::lowest(), [](M a, M b) { return pm::max_of(a, b); },
          [](M acc, const pm::Window&) { return acc; });
    }
    const int64_t img = g.image_size(), p = g.cols_size(), n2 = g.cols[2];
    const WindowTable table(g);
    const Interior row_interior = interior(g, table);
#pragma omp parallel if (planes > 1 && planes * p * 4 >= kParallelWork)
    {
      std::vector<M> value(static_cast<size_t>(n2));
      std::vector<int64_t> arg(static_cast<size_t>(n2));
#pragma omp for
      for (int64_t pl = 0; pl < planes; ++pl) {
        int64_t k = pl * p;
        for (int64_t o0 = 0; o0 < g.cols[0]; ++o0) {
          for (int64_t o1 = 0; o1 < g.cols[1]; ++o1) {
            argmax_row(g, table, row_interior, o0, o1, xs + pl * img, value.data(), arg.data());
            for (int64_t o2 = 0; o2 < n2; ++o2, ++k) {
              ys[k] = pm::PoolElem<T>::store(value[o2]);
              indices[k] =
                  pl * img + (column_major ? pm::column_major_offset(g, arg[o2]) : arg[o2]);
            }
          }
        }
      }
    }
  });
}

void average_pool(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* x, void* y,
                  bool count_include_pad) {
  const pm::Geom g = pm::to_geom(geometry);
  pm::visit_pool_type<false>(dtype, "average_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    using M = typename pm::PoolElem<T>::Math;
    // average_window's division of fold_window's sum.
    pool_by_rows(
        g, xs, planes, ys, M(0), [](M a, M b) { return shared::add(a, b); },
        [&](M acc, const pm::Window& w) {
          const int64_t count = pm::window_count(g, w, count_include_pad);
          return count > 0 ? shared::div(acc, static_cast<M>(count)) : M(0);
        });
  });
}

namespace {

// One plane's block sum: pm::thread_sum's sums, then the block's tree (data_launch.cuh's
// block_tree_sum, halving as a warp's does), computed on the live lanes only. Lanes t >= spatial
// hold +0, so the tree's steps whose partners are all such lanes add +0 to each live lane, which
// changes nothing: a lane's sum starts as 0 + x, never -0 (the block's mean of -0s is +0), and
// so do the sums of such values. The first step with a live partner reads zeros past the live
// lanes. The loops are contiguous, so the compiler vectorizes them: a plane of a few elements
// (squeeze-excite blocks at a CNN's last stages) costs a few adds instead of a walk over the
// 256 lanes' tree.
template <typename T, typename M>
M block_sum(const T* xp, int64_t spatial, M* v) {
  using E = pm::PoolElem<T>;
  constexpr int kLanes = pm::kGlobalThreads;
  const int live = spatial < kLanes ? static_cast<int>(spatial) : kLanes;
  if (live == 0) return M(0);
  for (int t = 0; t < live; ++t) v[t] = shared::add(M(0), E::load(xp[t]));
  for (int64_t base = kLanes; base < spatial; base += kLanes) {
    const int n = static_cast<int>(std::min<int64_t>(kLanes, spatial - base));
    for (int t = 0; t < n; ++t) v[t] = shared::add(v[t], E::load(xp[base + t]));
  }
  int off = kLanes / 2;
  while (off >= live) off /= 2;
  for (int t = live; t < 2 * off; ++t) v[t] = M(0);
  for (; off > 0; off /= 2) {
    for (int l = 0; l < off; ++l) v[l] = shared::add(v[l], v[l + off]);
  }
  return v[0];
}

}  // namespace

void global_average_pool(DType dtype, int64_t planes, int64_t spatial, const void* x, void* y) {
  pm::visit_pool_type<false>(dtype, "global_average_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using E = pm::PoolElem<T>;
    using M = typename E::Math;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
#pragma omp parallel for if (planes > 1 && planes * spatial >= kParallelWork)
    for (int64_t pl = 0; pl < planes; ++pl) {
      M v[pm::kGlobalThreads];
      ys[pl] = E::store(pm::global_mean(block_sum(xs + pl * spatial, spatial, v), spatial));
    }
  });
}

namespace {

// dx of each plane from its outputs in increasing output order: scatter_row(plane, o0, o1,
// j, acc) adds the shares of output row (o0, o1), whose first output is the plane's j-th, into
// acc (the plane's dx in the compute type M), output by output; acc is then stored. That is the
// order in which the kernels' per-dx-element gathers add.
template <typename M, typename T, typename ScatterRow>
void scatter_planes(const pm::Geom& g, int64_t planes, T* dx, ScatterRow scatter_row) {
  const int64_t img = g.image_size();
#pragma omp parallel if (planes > 1 && planes * img >= kParallelWork)
  {
    std::vector<M> acc(static_cast<size_t>(img));
#pragma omp for
    for (int64_t pl = 0; pl < planes; ++pl) {
      std::fill(acc.begin(), acc.end(), M(0));
      int64_t j = 0;
      for (int64_t o0 = 0; o0 < g.cols[0]; ++o0) {
        for (int64_t o1 = 0; o1 < g.cols[1]; ++o1, j += g.cols[2])
          scatter_row(pl, o0, o1, j, acc.data());
      }
      store_plane(acc.data(), img, dx + pl * img);
    }
  }
}

// The largest tap table the gather path builds (4 bytes an entry), and the image size up to
// which its 32-bit offsets hold.
constexpr int64_t kMaxTapEntries = int64_t{1} << 22;
constexpr int64_t kMaxGatherImage = int64_t{1} << 30;

// g's windows as pool_avx512.h's table; false (table untouched) where it would be too large.
bool build_tap_table(const pm::Geom& g, const WindowTable& table, TapTable* t) {
  const int64_t outputs = g.cols_size(), taps = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int64_t padded = (outputs + 15) / 16 * 16;
  if (taps <= 0 || padded * taps > kMaxTapEntries || g.image_size() > kMaxGatherImage) return false;
  t->outputs = outputs;
  t->padded = padded;
  t->taps = taps;
  t->offset.assign(static_cast<size_t>(padded * taps), -1);
  int64_t o = 0;
  for (int64_t o0 = 0; o0 < g.cols[0]; ++o0) {
    for (int64_t o1 = 0; o1 < g.cols[1]; ++o1) {
      for (int64_t o2 = 0; o2 < g.cols[2]; ++o2, ++o) {
        int64_t k = 0;
        for_each_tap(g, table.at(o0, o1, o2),
                     [&](int64_t off) { t->offset[k++ * padded + o] = static_cast<int32_t>(off); });
      }
    }
  }
  return true;
}

// MaxPoolGrad through pool_avx512.h for f32 and bf16; false (nothing written) where it does
// not apply.
bool max_pool_grad_gathered(DType dtype, const pm::Geom& g, const WindowTable& table,
                            int64_t planes, const void* x, const void* dy, void* dx) {
  const bool bf16 = dtype == DType::kBFloat16;
  if ((dtype != DType::kFloat32 && !bf16) || !pool_avx512_available()) return false;
  TapTable taps;
  if (!build_tap_table(g, table, &taps)) return false;
  const int64_t img = g.image_size(), p = g.cols_size();
  const int64_t bytes = bf16 ? 2 : 4;
#pragma omp parallel if (planes > 1 && planes * img >= kParallelWork)
  {
    std::vector<float> scratch(static_cast<size_t>(bf16 ? 2 * img : 0));
    std::vector<int32_t> arg(static_cast<size_t>(taps.padded));
#pragma omp for
    for (int64_t pl = 0; pl < planes; ++pl) {
      max_pool_grad_plane_avx512(taps, bf16, img, static_cast<const char*>(x) + pl * img * bytes,
                                 static_cast<const char*>(dy) + pl * p * bytes,
                                 static_cast<char*>(dx) + pl * img * bytes, scratch.data(),
                                 arg.data());
    }
  }
  return true;
}

}  // namespace

void max_pool_grad(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* x,
                   const void* dy, void* dx) {
  const pm::Geom g = pm::to_geom(geometry);
  pm::visit_pool_type<false>(dtype, "max_pool_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using E = pm::PoolElem<T>;
    using M = typename E::Math;
    const T* xs = static_cast<const T*>(x);
    const T* dys = static_cast<const T*>(dy);
    const int64_t img = g.image_size(), p = g.cols_size();
    // Each output's dy to its window's first maximum (offset 0 for an empty window):
    // max_grad_at's sum for every dx element.
    const WindowTable table(g);
    if (max_pool_grad_gathered(dtype, g, table, planes, x, dy, dx)) return;
    const Interior row_interior = interior(g, table);
    scatter_planes<M>(
        g, planes, static_cast<T*>(dx), [&](int64_t pl, int64_t o0, int64_t o1, int64_t j, M* acc) {
          thread_local std::vector<M> value;
          thread_local std::vector<int64_t> arg;
          value.resize(static_cast<size_t>(g.cols[2]));
          arg.resize(static_cast<size_t>(g.cols[2]));
          argmax_row(g, table, row_interior, o0, o1, xs + pl * img, value.data(), arg.data());
          const T* dyr = dys + pl * p + j;
          for (int64_t o2 = 0; o2 < g.cols[2]; ++o2)
            acc[arg[o2]] = shared::add(acc[arg[o2]], E::load(dyr[o2]));
        });
  });
}

void average_pool_grad(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* dy,
                       void* dx, bool count_include_pad) {
  const pm::Geom g = pm::to_geom(geometry);
  pm::visit_pool_type<false>(dtype, "average_pool_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using E = pm::PoolElem<T>;
    using M = typename E::Math;
    const T* dys = static_cast<const T*>(dy);
    const int64_t p = g.cols_size();
    // dy / divisor of each output to its window's in-image taps: average_grad_at's sum for
    // every dx element.
    const WindowTable table(g);
    scatter_planes<M>(
        g, planes, static_cast<T*>(dx), [&](int64_t pl, int64_t o0, int64_t o1, int64_t j, M* acc) {
          for (int64_t o2 = 0; o2 < g.cols[2]; ++o2) {
            const pm::Window w = table.at(o0, o1, o2);
            const int64_t count = pm::window_count(g, w, count_include_pad);
            if (count <= 0) continue;
            const M share = shared::div(E::load(dys[pl * p + j + o2]), static_cast<M>(count));
            for_each_tap(g, w, [&](int64_t off) { acc[off] = shared::add(acc[off], share); });
          }
        });
  });
}

}  // namespace ampc::kernels::twin
