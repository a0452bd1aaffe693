#include "kernels/twin/softmax.h"

#include <vector>

#include "kernels/shared/rowwise.h"
#include "kernels/shared/rowwise_dispatch.h"
#include "kernels/shared/rowwise_tree.h"

namespace ampc::kernels::twin {
namespace {

namespace sh = kernels::shared;

// inner == 1: one row as a block (or warp) of the kernel reduces it.
template <typename T>
void softmax_row(const T* x, T* y, int64_t n, bool log_softmax) {
  const sh::RowPlan plan = sh::row_plan(n);
  auto load = [&](int64_t j) { return sh::load_f(x, j); };
  const float m = sh::row_reduce_host(
      plan, n, sh::kNegInf, [&](float a, int64_t j) { return sh::MaxCombine()(a, load(j)); },
      sh::MaxCombine());
  const float s = sh::row_reduce_host(
      plan, n, 0.0f, [&](float a, int64_t j) { return sh::add(a, sh::exp_shifted(load(j), m)); },
      sh::SumCombine());
  if (log_softmax) {
    const float log_s = sh::log_f(s);
    for (int64_t j = 0; j < n; ++j) sh::store_f(y, j, sh::log_softmax_value(load(j), m, log_s));
  } else {
    const float inv = sh::softmax_inv_sum(s);
    for (int64_t j = 0; j < n; ++j) sh::store_f(y, j, sh::softmax_value(load(j), m, inv));
  }
}

// inner > 1: one thread per column walks the n rows in order.
template <typename T>
void softmax_column(const T* x, T* y, int64_t n, int64_t inner, bool log_softmax) {
  for (int64_t i = 0; i < inner; ++i) {
    float m = sh::kNegInf, s = 0.0f;
    for (int64_t r = 0; r < n; ++r) m = sh::MaxCombine()(m, sh::load_f(x, r * inner + i));
    for (int64_t r = 0; r < n; ++r)
      s = sh::add(s, sh::exp_shifted(sh::load_f(x, r * inner + i), m));
    const float f = log_softmax ? sh::log_f(s) : sh::softmax_inv_sum(s);
    for (int64_t r = 0; r < n; ++r) {
      const float v = sh::load_f(x, r * inner + i);
      sh::store_f(y, r * inner + i,
                  log_softmax ? sh::log_softmax_value(v, m, f) : sh::softmax_value(v, m, f));
    }
  }
}

}  // namespace

void softmax(DType dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
             bool log_softmax) {
  sh::dispatch_float_types(dtype, "softmax", [&](auto tag) {
    using T = decltype(tag);
    if (outer <= 0 || n <= 0 || inner <= 0) return;
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
#pragma omp parallel for if (outer * n * inner > (1 << 16))
    for (int64_t o = 0; o < outer; ++o) {
      if (inner == 1) {
        softmax_row(xt + o * n, yt + o * n, n, log_softmax);
      } else {
        softmax_column(xt + o * n * inner, yt + o * n * inner, n, inner, log_softmax);
      }
    }
  });
}

}  // namespace ampc::kernels::twin
