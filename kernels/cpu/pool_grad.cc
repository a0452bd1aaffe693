#include "kernels/cpu/pool_grad.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/pool.h"
#include "kernels/shared/pool_math.h"

namespace ampc::kernels::cpu {
namespace {

// The window helpers are pool_math.h's, which the CUDA pooling kernels and their twins use too.
using shared::pool::Window;
using shared::pool::window_at;
using shared::pool::window_count;

}  // namespace

template <typename T>
void max_pool_grad(const ConvGeom& g, const T* x, const T* dy, int64_t planes, T* dx) {
  const int64_t p = g.cols_size();
  std::vector<T> y(static_cast<size_t>(planes * p));
  std::vector<int64_t> indices(y.size());
  max_pool(g, x, planes, y.data(), indices.data(), false);
  std::fill(dx, dx + planes * g.image_size(), T(0));
  for (size_t j = 0; j < indices.size(); ++j) dx[indices[j]] += dy[j];
}

template <typename T>
void avg_pool_grad(const ConvGeom& g, const T* dy, int64_t planes, T* dx, bool count_include_pad) {
  const int64_t img = g.image_size();
  std::fill(dx, dx + planes * img, T(0));
  for (int64_t pl = 0; pl < planes; ++pl) {
    T* xp = dx + pl * img;
    for (int64_t o0 = 0; o0 < g.cols[0]; ++o0) {
      for (int64_t o1 = 0; o1 < g.cols[1]; ++o1) {
        for (int64_t o2 = 0; o2 < g.cols[2]; ++o2) {
          const int64_t o[3] = {o0, o1, o2};
          const Window w = window_at(g, o);
          const int64_t *start = w.start, *lo = w.lo, *hi = w.hi;
          const int64_t count = window_count(g, w, count_include_pad);
          if (count <= 0) continue;
          const T share = dy[(pl * g.cols[0] + o0) * g.cols[1] * g.cols[2] + o1 * g.cols[2] + o2] /
                          static_cast<T>(count);
          for (int64_t t0 = lo[0]; t0 < hi[0]; ++t0) {
            const int64_t i0 = start[0] + t0 * g.dilation[0];
            for (int64_t t1 = lo[1]; t1 < hi[1]; ++t1) {
              const int64_t i1 = start[1] + t1 * g.dilation[1];
              const int64_t row = (i0 * g.image[1] + i1) * g.image[2] + start[2];
              for (int64_t t2 = lo[2]; t2 < hi[2]; ++t2) xp[row + t2 * g.dilation[2]] += share;
            }
          }
        }
      }
    }
  }
}

template void max_pool_grad<float>(const ConvGeom&, const float*, const float*, int64_t, float*);
template void max_pool_grad<double>(const ConvGeom&, const double*, const double*, int64_t,
                                    double*);
template void avg_pool_grad<float>(const ConvGeom&, const float*, int64_t, float*, bool);
template void avg_pool_grad<double>(const ConvGeom&, const double*, int64_t, double*, bool);

}  // namespace ampc::kernels::cpu
