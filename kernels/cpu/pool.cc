#include "kernels/cpu/pool.h"

#include <cmath>
#include <vector>

#include "kernels/shared/pool_math.h"

namespace ampc::kernels::cpu {
namespace {

constexpr int64_t kParallelWork = 1 << 18;

// The window helpers are pool_math.h's, which the CUDA pooling kernels and their twins use too.
using shared::pool::tap_range;
using shared::pool::Window;

// Per dimension and output coordinate: window start and its taps inside the image.
struct WindowTable {
  std::vector<int64_t> start[3], lo[3], hi[3];
  explicit WindowTable(const ConvGeom& g) {
    for (int d = 0; d < 3; ++d) {
      for (int64_t o = 0; o < g.cols[d]; ++o) {
        int64_t l, h;
        const int64_t s = o * g.stride[d] - g.pad[d];
        tap_range(s, g.kernel[d], g.dilation[d], 0, g.image[d], &l, &h);
        start[d].push_back(s);
        lo[d].push_back(l);
        hi[d].push_back(h);
      }
    }
  }
  Window at(int64_t o0, int64_t o1, int64_t o2) const {
    const int64_t o[3] = {o0, o1, o2};
    Window w;
    for (int d = 0; d < 3; ++d) {
      w.start[d] = start[d][o[d]];
      w.lo[d] = lo[d][o[d]];
      w.hi[d] = hi[d][o[d]];
    }
    return w;
  }
};

// Calls f(plane, x_plane, output_index, window) for every output of every plane.
template <typename T, typename F>
void for_each_window(const ConvGeom& g, const T* x, int64_t planes, F&& f) {
  const int64_t img = g.image_size(), p = g.cols_size();
  const WindowTable table(g);
#pragma omp parallel for if (planes > 1 && planes * p * g.kernel_size() > kParallelWork)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* xp = x + pl * img;
    int64_t j = pl * p;
    for (int64_t o0 = 0; o0 < g.cols[0]; ++o0) {
      for (int64_t o1 = 0; o1 < g.cols[1]; ++o1) {
        for (int64_t o2 = 0; o2 < g.cols[2]; ++o2, ++j) f(pl, xp, j, table.at(o0, o1, o2));
      }
    }
  }
}

// Calls tap(flat spatial offset) for every in-image tap of window w.
template <typename F>
inline void for_each_tap(const ConvGeom& g, const Window& w, F&& tap) {
  for (int64_t t0 = w.lo[0]; t0 < w.hi[0]; ++t0) {
    const int64_t i0 = w.start[0] + t0 * g.dilation[0];
    for (int64_t t1 = w.lo[1]; t1 < w.hi[1]; ++t1) {
      const int64_t row = (i0 * g.image[1] + w.start[1] + t1 * g.dilation[1]) * g.image[2];
      for (int64_t t2 = w.lo[2]; t2 < w.hi[2]; ++t2) {
        tap(row + w.start[2] + t2 * g.dilation[2]);
      }
    }
  }
}

}  // namespace

template <typename T>
void lp_pool(const ConvGeom& g, const T* x, int64_t planes, T* y, int64_t p) {
  const T pt = static_cast<T>(p);
  for_each_window(g, x, planes, [&](int64_t, const T* xp, int64_t out, const Window& w) {
    T sum = 0;
    if (p == 2) {
      for_each_tap(g, w, [&](int64_t off) { sum += xp[off] * xp[off]; });
      y[out] = std::sqrt(sum);
    } else if (p == 1) {
      for_each_tap(g, w, [&](int64_t off) { sum += std::abs(xp[off]); });
      y[out] = sum;
    } else {
      for_each_tap(g, w, [&](int64_t off) { sum += std::pow(std::abs(xp[off]), pt); });
      y[out] = std::pow(sum, T(1) / pt);
    }
  });
}

template void lp_pool<float>(const ConvGeom&, const float*, int64_t, float*, int64_t);
template void lp_pool<double>(const ConvGeom&, const double*, int64_t, double*, int64_t);

}  // namespace ampc::kernels::cpu
