// CPU twin of kernels/cuda/pool.cu: pool_math.h's per-output and per-dx-element functions over
// every element, and GlobalAveragePool's block reduction (thread sums, then the tree) emulated.
#include "kernels/twin/pool.h"

#include <string>
#include <vector>

#include "kernels/shared/elementwise_dispatch.h"
#include "kernels/shared/pool_layout.h"
#include "kernels/shared/pool_math.h"

namespace ampc::kernels::twin {

namespace sh = ampc::kernels::shared;
namespace pm = ampc::kernels::shared::pool;

namespace {

using pm::to_geom;
using pm::visit_pool_type;

}  // namespace

void max_pool(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* x, void* y,
              int64_t* indices, bool column_major) {
  const pm::Geom g = to_geom(geometry);
  visit_pool_type<true>(dtype, "max_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using E = pm::PoolElem<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    const int64_t img = g.image_size(), p = g.cols_size();
    for (int64_t pl = 0; pl < planes; ++pl) {
      for (int64_t j = 0; j < p; ++j) {
        int64_t o[3];
        pm::output_coords(g, j, o);
        const pm::Window w = pm::window_at(g, o);
        if (!indices) {
          ys[pl * p + j] = E::store(pm::max_window(g, w, xs + pl * img));
          continue;
        }
        int64_t arg;
        ys[pl * p + j] = E::store(pm::argmax_window(g, w, xs + pl * img, &arg));
        indices[pl * p + j] = pl * img + (column_major ? pm::column_major_offset(g, arg) : arg);
      }
    }
  });
}

void average_pool(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* x, void* y,
                  bool count_include_pad) {
  const pm::Geom g = to_geom(geometry);
  visit_pool_type<false>(dtype, "average_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using E = pm::PoolElem<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    const int64_t img = g.image_size(), p = g.cols_size();
    for (int64_t pl = 0; pl < planes; ++pl) {
      for (int64_t j = 0; j < p; ++j) {
        int64_t o[3];
        pm::output_coords(g, j, o);
        ys[pl * p + j] =
            E::store(pm::average_window(g, pm::window_at(g, o), xs + pl * img, count_include_pad));
      }
    }
  });
}

void global_average_pool(DType dtype, int64_t planes, int64_t spatial, const void* x, void* y) {
  visit_pool_type<false>(dtype, "global_average_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using E = pm::PoolElem<T>;
    using M = typename E::Math;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    std::vector<M> v(pm::kGlobalThreads);
    for (int64_t pl = 0; pl < planes; ++pl) {
      for (int t = 0; t < pm::kGlobalThreads; ++t)
        v[t] = pm::thread_sum(xs + pl * spatial, spatial, t);
      for (int s = pm::kGlobalThreads / 2; s > 0; s /= 2) {
        for (int t = 0; t < s; ++t) v[t] = pm::padd(v[t], v[t + s]);
      }
      ys[pl] = E::store(pm::global_mean(v[0], spatial));
    }
  });
}

void max_pool_grad(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* x,
                   const void* dy, void* dx) {
  const pm::Geom g = to_geom(geometry);
  const bool empty = pm::has_empty_window(g);
  visit_pool_type<false>(dtype, "max_pool_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using E = pm::PoolElem<T>;
    const T* xs = static_cast<const T*>(x);
    const T* dys = static_cast<const T*>(dy);
    T* dxs = static_cast<T*>(dx);
    const int64_t img = g.image_size(), p = g.cols_size();
    for (int64_t pl = 0; pl < planes; ++pl) {
      for (int64_t k = 0; k < img; ++k) {
        int64_t i[3];
        pm::image_coords(g, k, i);
        dxs[pl * img + k] = E::store(pm::max_grad_at(g, xs + pl * img, dys + pl * p, i, empty));
      }
    }
  });
}

void average_pool_grad(DType dtype, const PoolGeometry& geometry, int64_t planes, const void* dy,
                       void* dx, bool count_include_pad) {
  const pm::Geom g = to_geom(geometry);
  visit_pool_type<false>(dtype, "average_pool_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using E = pm::PoolElem<T>;
    const T* dys = static_cast<const T*>(dy);
    T* dxs = static_cast<T*>(dx);
    const int64_t img = g.image_size(), p = g.cols_size();
    for (int64_t pl = 0; pl < planes; ++pl) {
      for (int64_t k = 0; k < img; ++k) {
        int64_t i[3];
        pm::image_coords(g, k, i);
        dxs[pl * img + k] = E::store(pm::average_grad_at(g, dys + pl * p, i, count_include_pad));
      }
    }
  });
}

}  // namespace ampc::kernels::twin
