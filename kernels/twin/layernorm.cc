#include "kernels/twin/layernorm.h"

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "kernels/shared/kernel_args.h"
#include "kernels/shared/rowwise_dispatch.h"
#include "kernels/twin/row_host.h"

namespace ampc::kernels::twin {
namespace {

template <typename T, typename P, typename S>
constexpr bool kAllF32 =
    std::is_same_v<T, float>&& std::is_same_v<P, float>&& std::is_same_v<S, float>;

// The row's mean and inverse deviation as a block of the kernel computes them: the sum, then
// the squared deviations from the mean (sq: `cols` values of scratch), each folded in the
// block's order. The forward and the backward share it, so the backward's xhat is the forward's.
template <typename M>
[[gnu::always_inline]] inline void row_stats(sh::RowPlan plan, const M* v, int64_t cols, M eps,
                                             M* sq, M* mean, M* inv_std) {
  const M m = sh::mean_of(fold_row(plan, v, cols, M(0), SumOf()), cols);
  for (int64_t j = 0; j < cols; ++j) sq[j] = sh::add_sq_dev(M(0), v[j], m);
  *inv_std = sh::inv_std_of(fold_row(plan, sq, cols, M(0), SumOf()), cols, eps);
  *mean = m;
}

// Rows [begin, end) of the forward. Always inlined: into the generic caller below and into an
// AVX-512 one (layer_norm_block_f32_avx512), where the f32 loops run on 16 lanes; the same
// operations in the same order either way, so the same bits.
template <typename T, typename S, typename M = MathOf<T>>
[[gnu::always_inline]] inline void layer_norm_block(int64_t begin, int64_t end, const T* x,
                                                    int64_t cols, const M* s, const M* b, M eps,
                                                    T* y, S* mean, S* inv_std, std::vector<M>& buf,
                                                    M* sq) {
  const sh::RowPlan plan = sh::row_plan(cols);
  for (int64_t r = begin; r < end; ++r) {
    const M* v = load_row(x + r * cols, cols, buf);
    M m, inv;
    row_stats(plan, v, cols, eps, sq, &m, &inv);
    if (mean) mean[r] = sh::Elem<S>::store(static_cast<MathOf<S>>(m));
    if (inv_std) inv_std[r] = sh::Elem<S>::store(static_cast<MathOf<S>>(inv));
    T* yr = y + r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      yr[j] = sh::Elem<T>::store(
          sh::layer_norm_value(v[j], m, inv, s ? s + j : nullptr, b ? b + j : nullptr));
    }
  }
}

AMPC_AVX512_LOOPS void layer_norm_block_f32_avx512(int64_t begin, int64_t end, const float* x,
                                                   int64_t cols, const float* s, const float* b,
                                                   float eps, float* y, float* mean, float* inv_std,
                                                   std::vector<float>& buf, float* sq) {
  layer_norm_block<float, float>(begin, end, x, cols, s, b, eps, y, mean, inv_std, buf, sq);
}

template <typename T, typename P, typename S, typename M = MathOf<T>>
void layer_norm_rows(const T* x, int64_t rows, int64_t cols, const P* scale, const P* bias, M eps,
                     T* y, S* mean, S* inv_std, bool vector_loops) {
  std::vector<M> sc, bi;  // the parameters in the compute type, once
  const M* s = scale ? load_row(scale, cols, sc) : nullptr;
  const M* b = bias ? load_row(bias, cols, bi) : nullptr;
  for_rows(rows, rows > 1 && rows * cols > (1 << 16), [&](int64_t begin, int64_t end) {
    std::vector<M> buf, sq(cols);
    if constexpr (kAllF32<T, P, S>) {
      if (vector_loops) {
        return layer_norm_block_f32_avx512(begin, end, x, cols, s, b, eps, y, mean, inv_std, buf,
                                           sq.data());
      }
    }
    layer_norm_block<T, S>(begin, end, x, cols, s, b, eps, y, mean, inv_std, buf, sq.data());
  });
}

// A thread's scratch rows for the backward (the loaded rows where they are converted).
template <typename M>
struct GradScratch {
  std::vector<M> xb, db, sq, xhat, g, gx;
  explicit GradScratch(int64_t cols) : sq(cols), xhat(cols), g(cols), gx(cols) {}
};

// The backward, a chunk of rows at a time (the chunks the kernel's column sums use): per row
// the statistics, xhat, the row's two sums in the block's order and dx, and the chunk's column
// sums of dy * xhat and dy in row order. The kernel's three launches compute the same values;
// here a row is read once for all of them. Chunks [begin, end), always inlined as the forward's
// block.
template <typename T, typename D, typename M = MathOf<T>>
[[gnu::always_inline]] inline void layer_norm_grad_block(int64_t begin, int64_t end, const T* x,
                                                         const D* dy, int64_t rows, int64_t cols,
                                                         const M* s, M eps, T* dx, bool sums,
                                                         M* partials, GradScratch<M>& w) {
  const sh::RowPlan plan = sh::row_plan(cols);
  const int64_t chunk_rows = sh::layer_norm_grad_chunk_rows(rows);
  M *sq = w.sq.data(), *xhat = w.xhat.data(), *g = w.g.data(), *gx = w.gx.data();
  for (int64_t c = begin; c < end; ++c) {
    M* sum_dy_xhat = partials + c * 2 * cols;
    M* sum_dy = sum_dy_xhat + cols;
    std::fill(sum_dy_xhat, sum_dy_xhat + 2 * cols, M(0));
    for (int64_t r = c * chunk_rows; r < std::min(rows, (c + 1) * chunk_rows); ++r) {
      const M* v = load_row(x + r * cols, cols, w.xb);
      const M* d = load_row(dy + r * cols, cols, w.db);
      M m, inv;
      row_stats(plan, v, cols, eps, sq, &m, &inv);
      for (int64_t j = 0; j < cols; ++j) xhat[j] = sh::layer_norm_xhat(v[j], m, inv);
      if (sums) {
        for (int64_t j = 0; j < cols; ++j) {
          sum_dy_xhat[j] = sh::add(sum_dy_xhat[j], sh::mul(d[j], xhat[j]));
          sum_dy[j] = sh::add(sum_dy[j], d[j]);
        }
      }
      if (!dx) continue;
      for (int64_t j = 0; j < cols; ++j) {
        g[j] = sh::mul(d[j], s[j]);
        gx[j] = sh::mul(g[j], xhat[j]);
      }
      const M mean_g = sh::mean_of(fold_row(plan, g, cols, M(0), SumOf()), cols);
      const M mean_gx = sh::mean_of(fold_row(plan, gx, cols, M(0), SumOf()), cols);
      T* out = dx + r * cols;
      for (int64_t j = 0; j < cols; ++j) {
        out[j] = sh::Elem<T>::store(sh::layer_norm_grad_value(g[j], xhat[j], mean_g, mean_gx, inv));
      }
    }
  }
}

// dy f32 or bf16 (read widened).
template <typename D>
AMPC_AVX512_LOOPS void layer_norm_grad_block_f32_avx512(int64_t begin, int64_t end, const float* x,
                                                        const D* dy, int64_t rows, int64_t cols,
                                                        const float* s, float eps, float* dx,
                                                        bool sums, float* partials,
                                                        GradScratch<float>& w) {
  layer_norm_grad_block<float>(begin, end, x, dy, rows, cols, s, eps, dx, sums, partials, w);
}

// dy of x's type T, or (D) 16-bit with f32 x.
template <typename T, typename D, typename P, typename M = MathOf<T>>
void layer_norm_grad_rows(const T* x, const D* dy, int64_t rows, int64_t cols, const P* scale,
                          M eps, T* dx, P* dscale, P* dbias, M* partials, bool vector_loops) {
  std::vector<M> sc;
  const M* s = load_row(scale, cols, sc);
  const int64_t chunks = sh::layer_norm_grad_chunks(rows);
  const bool sums = dscale || dbias;
  for_rows(chunks, chunks > 1 && rows * cols > (1 << 16), [&](int64_t begin, int64_t end) {
    GradScratch<M> w(cols);
    if constexpr (kAllF32<T, P, float> && !std::is_same_v<D, Half>) {
      if (vector_loops) {
        return layer_norm_grad_block_f32_avx512(begin, end, x, dy, rows, cols, s, eps, dx, sums,
                                                partials, w);
      }
    }
    layer_norm_grad_block<T>(begin, end, x, dy, rows, cols, s, eps, dx, sums, partials, w);
  });
  if (!sums) return;
  // The chunks' sums in chunk order, every column at once.
  std::vector<M> total(2 * cols, M(0));
  for (int64_t c = 0; c < chunks; ++c) {
    const M* p = partials + c * 2 * cols;
    for (int64_t j = 0; j < 2 * cols; ++j) total[j] = sh::add(total[j], p[j]);
  }
  for (int64_t j = 0; j < cols; ++j) {
    if (dscale) dscale[j] = sh::Elem<P>::store(static_cast<MathOf<P>>(total[j]));
    if (dbias) dbias[j] = sh::Elem<P>::store(static_cast<MathOf<P>>(total[cols + j]));
  }
}

}  // namespace

void layer_norm(DType x_dtype, const void* x, int64_t rows, int64_t cols, DType param_dtype,
                const void* scale, const void* bias, float epsilon, void* y, DType stat_dtype,
                void* mean, void* inv_std, RowLoops loops) {
  if (rows <= 0 || cols < 0) return;
  const bool vector_loops = loops == RowLoops::kBest && cpu_has_avx512_bw_vl();
  if (x_dtype == DType::kFloat64) {  // the CPU op's f64: every operand f64
    if (param_dtype != DType::kFloat64 || stat_dtype != DType::kFloat64) {
      throw Error("layer_norm: f64 input needs f64 scale, bias and statistics");
    }
    return layer_norm_rows(static_cast<const double*>(x), rows, cols,
                           static_cast<const double*>(scale), static_cast<const double*>(bias),
                           static_cast<double>(epsilon), static_cast<double*>(y),
                           static_cast<double*>(mean), static_cast<double*>(inv_std), false);
  }
  sh::dispatch_float_types(x_dtype, "layer_norm input", [&](auto xt) {
    sh::dispatch_float_types(param_dtype, "layer_norm scale/bias", [&](auto pt) {
      sh::dispatch_float_types(stat_dtype, "layer_norm statistics", [&](auto st) {
        using T = decltype(xt);
        using P = decltype(pt);
        using S = decltype(st);
        layer_norm_rows(static_cast<const T*>(x), rows, cols, static_cast<const P*>(scale),
                        static_cast<const P*>(bias), epsilon, static_cast<T*>(y),
                        static_cast<S*>(mean), static_cast<S*>(inv_std), vector_loops);
      });
    });
  });
}

void layer_norm_grad(DType x_dtype, DType dy_dtype, const void* x, const void* dy, int64_t rows,
                     int64_t cols, DType param_dtype, const void* scale, float epsilon, void* dx,
                     void* dscale, void* dbias, void* workspace, RowLoops loops) {
  if (!sh::grad_input_fits(dy_dtype, x_dtype)) {
    throw Error("layer_norm_grad: dY of type " + std::string(dtype_name(dy_dtype)) +
                " does not fit X of type " + std::string(dtype_name(x_dtype)));
  }
  if (rows < 0 || cols <= 0) return;  // no rows: dscale and dbias are zeros
  const bool vector_loops = loops == RowLoops::kBest && cpu_has_avx512_bw_vl();
  const int64_t value_bytes = x_dtype == DType::kFloat64 ? 8 : 4;
  char* partials = static_cast<char*>(workspace) +
                   sh::layer_norm_grad_layout(rows, cols, value_bytes).partials_offset;
  if (x_dtype == DType::kFloat64) {  // the CPU op's f64: every operand f64
    if (param_dtype != DType::kFloat64) throw Error("layer_norm_grad: f64 input needs f64 scale");
    return layer_norm_grad_rows(static_cast<const double*>(x), static_cast<const double*>(dy), rows,
                                cols, static_cast<const double*>(scale),
                                static_cast<double>(epsilon), static_cast<double*>(dx),
                                static_cast<double*>(dscale), static_cast<double*>(dbias),
                                reinterpret_cast<double*>(partials), false);
  }
  // dY of x's type, or 16-bit with f32 x (grad_input_fits): every pair dispatched, the others
  // refused above.
  sh::dispatch_float_types(x_dtype, "layer_norm_grad input", [&](auto xt) {
    sh::dispatch_float_types(dy_dtype, "layer_norm_grad dY", [&](auto dt) {
      sh::dispatch_float_types(param_dtype, "layer_norm_grad scale", [&](auto pt) {
        using T = decltype(xt);
        using D = decltype(dt);
        using P = decltype(pt);
        if constexpr (std::is_same_v<T, D> || std::is_same_v<T, float>) {
          layer_norm_grad_rows(static_cast<const T*>(x), static_cast<const D*>(dy), rows, cols,
                               static_cast<const P*>(scale), epsilon, static_cast<T*>(dx),
                               static_cast<P*>(dscale), static_cast<P*>(dbias),
                               reinterpret_cast<float*>(partials), vector_loops);
        }
      });
    });
  });
}

}  // namespace ampc::kernels::twin
