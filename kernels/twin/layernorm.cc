#include "kernels/twin/layernorm.h"

#include "kernels/shared/rowwise.h"
#include "kernels/shared/rowwise_dispatch.h"
#include "kernels/shared/rowwise_tree.h"

namespace ampc::kernels::twin {
namespace {

namespace sh = kernels::shared;

template <typename T, typename P, typename S>
void layer_norm_rows(const T* x, int64_t rows, int64_t cols, const P* scale, const P* bias,
                     float eps, T* y, S* mean, S* inv_std) {
  const sh::RowPlan plan = sh::row_plan(cols);
#pragma omp parallel for if (rows * cols > (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    auto load = [&](int64_t j) { return sh::load_f(xr, j); };
    const float sum = sh::row_reduce_host(
        plan, cols, 0.0f, [&](float a, int64_t j) { return sh::add(a, load(j)); },
        sh::SumCombine());
    const float m = sh::mean_of(sum, cols);
    const float q = sh::row_reduce_host(
        plan, cols, 0.0f, [&](float a, int64_t j) { return sh::add_sq_dev(a, load(j), m); },
        sh::SumCombine());
    const float inv = sh::inv_std_of(q, cols, eps);
    if (mean) sh::store_f(mean, r, m);
    if (inv_std) sh::store_f(inv_std, r, inv);
    for (int64_t j = 0; j < cols; ++j) {
      const float s = scale ? sh::load_f(scale, j) : 0.0f, b = bias ? sh::load_f(bias, j) : 0.0f;
      sh::store_f(yr, j,
                  sh::layer_norm_value(load(j), m, inv, scale ? &s : nullptr, bias ? &b : nullptr));
    }
  }
}

}  // namespace

void layer_norm(DType x_dtype, const void* x, int64_t rows, int64_t cols, DType param_dtype,
                const void* scale, const void* bias, float epsilon, void* y, DType stat_dtype,
                void* mean, void* inv_std) {
  sh::dispatch_float_types(x_dtype, "layer_norm input", [&](auto xt) {
    sh::dispatch_float_types(param_dtype, "layer_norm scale/bias", [&](auto pt) {
      sh::dispatch_float_types(stat_dtype, "layer_norm statistics", [&](auto st) {
        using T = decltype(xt);
        using P = decltype(pt);
        using S = decltype(st);
        if (rows <= 0 || cols < 0) return;
        layer_norm_rows(static_cast<const T*>(x), rows, cols, static_cast<const P*>(scale),
                        static_cast<const P*>(bias), epsilon, static_cast<T*>(y),
                        static_cast<S*>(mean), static_cast<S*>(inv_std));
      });
    });
  });
}

}  // namespace ampc::kernels::twin
