#include "kernels/twin/layernorm.h"

#include <vector>

#include "base/error.h"
#include "kernels/shared/rowwise_dispatch.h"
#include "kernels/twin/row_host.h"

namespace ampc::kernels::twin {
namespace {

// One row as a block of the kernel normalises it: the sum, then the squared deviations from
// the mean, each folded in the block's order.
template <typename T, typename P, typename S, typename M = MathOf<T>>
void layer_norm_rows(const T* x, int64_t rows, int64_t cols, const P* scale, const P* bias, M eps,
                     T* y, S* mean, S* inv_std) {
  const sh::RowPlan plan = sh::row_plan(cols);
  std::vector<M> sc, bi;  // the parameters in the compute type, once
  const M* s = scale ? load_row(scale, cols, sc) : nullptr;
  const M* b = bias ? load_row(bias, cols, bi) : nullptr;
  for_rows(rows, rows > 1 && rows * cols > (1 << 16), [&](int64_t begin, int64_t end) {
    std::vector<M> buf, sq(cols);
    for (int64_t r = begin; r < end; ++r) {
      const M* v = load_row(x + r * cols, cols, buf);
      const M m = sh::mean_of(fold_row(plan, v, cols, M(0), SumOf()), cols);
      for (int64_t j = 0; j < cols; ++j) sq[j] = sh::add_sq_dev(M(0), v[j], m);
      const M inv = sh::inv_std_of(fold_row(plan, sq.data(), cols, M(0), SumOf()), cols, eps);
      if (mean) mean[r] = sh::Elem<S>::store(static_cast<MathOf<S>>(m));
      if (inv_std) inv_std[r] = sh::Elem<S>::store(static_cast<MathOf<S>>(inv));
      T* yr = y + r * cols;
      for (int64_t j = 0; j < cols; ++j) {
        yr[j] = sh::Elem<T>::store(
            sh::layer_norm_value(v[j], m, inv, s ? s + j : nullptr, b ? b + j : nullptr));
      }
    }
  });
}

}  // namespace

void layer_norm(DType x_dtype, const void* x, int64_t rows, int64_t cols, DType param_dtype,
                const void* scale, const void* bias, float epsilon, void* y, DType stat_dtype,
                void* mean, void* inv_std) {
  if (rows <= 0 || cols < 0) return;
  if (x_dtype == DType::kFloat64) {  // the CPU op's f64: every operand f64
    if (param_dtype != DType::kFloat64 || stat_dtype != DType::kFloat64) {
      throw Error("layer_norm: f64 input needs f64 scale, bias and statistics");
    }
    return layer_norm_rows(static_cast<const double*>(x), rows, cols,
                           static_cast<const double*>(scale), static_cast<const double*>(bias),
                           static_cast<double>(epsilon), static_cast<double*>(y),
                           static_cast<double*>(mean), static_cast<double*>(inv_std));
  }
  sh::dispatch_float_types(x_dtype, "layer_norm input", [&](auto xt) {
    sh::dispatch_float_types(param_dtype, "layer_norm scale/bias", [&](auto pt) {
      sh::dispatch_float_types(stat_dtype, "layer_norm statistics", [&](auto st) {
        using T = decltype(xt);
        using P = decltype(pt);
        using S = decltype(st);
        layer_norm_rows(static_cast<const T*>(x), rows, cols, static_cast<const P*>(scale),
                        static_cast<const P*>(bias), epsilon, static_cast<T*>(y),
                        static_cast<S*>(mean), static_cast<S*>(inv_std));
      });
    });
  });
}

}  // namespace ampc::kernels::twin
