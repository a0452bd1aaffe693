#include "kernels/twin/softmax.h"

#include <string>
#include <type_traits>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "kernels/shared/kernel_args.h"
#include "kernels/shared/rowwise_dispatch.h"
#include "kernels/twin/row_avx512.h"
#include "kernels/twin/row_host.h"

namespace ampc::kernels::twin {
namespace {

// inner == 1: one row as a block (or warp) of the kernel reduces it.
template <typename T, typename M = MathOf<T>>
void softmax_row(const T* x, T* y, int64_t n, bool log_softmax, std::vector<M>& buf,
                 std::vector<M>& e) {
  const M* v = load_row(x, n, buf);
  e.resize(n);
  M m, s;
  row_softmax_stats(v, n, e.data(), &m, &s);
  if (log_softmax) {
    const M log_s = log_of(s);
    for (int64_t j = 0; j < n; ++j) y[j] = sh::Elem<T>::store(sh::sub(sh::sub(v[j], m), log_s));
  } else {
    const M inv = sh::div(M(1), s);
    for (int64_t j = 0; j < n; ++j) y[j] = sh::Elem<T>::store(sh::mul(e[j], inv));
  }
}

// inner > 1: one thread per column walks the n rows in order.
template <typename T, typename M = MathOf<T>>
void softmax_column(const T* x, T* y, int64_t n, int64_t inner, bool log_softmax,
                    std::vector<M>& buf, std::vector<M>& e) {
  std::vector<M> m(inner), s(inner);
  e.resize(inner);
  column_softmax_stats(x, n, inner, m.data(), s.data(), buf, e.data());
  for (int64_t i = 0; i < inner; ++i) s[i] = log_softmax ? log_of(s[i]) : sh::div(M(1), s[i]);
  for (int64_t r = 0; r < n; ++r) {
    const M* v = load_row(x + r * inner, inner, buf);
    T* out = y + r * inner;
    for (int64_t i = 0; i < inner; ++i) e[i] = sh::sub(v[i], m[i]);
    if (log_softmax) {
      for (int64_t i = 0; i < inner; ++i) out[i] = sh::Elem<T>::store(sh::sub(e[i], s[i]));
    } else {
      exp_array(e.data(), inner, e.data());
      for (int64_t i = 0; i < inner; ++i) out[i] = sh::Elem<T>::store(sh::mul(e[i], s[i]));
    }
  }
}

// The backward of one row (inner == 1): the sum in the block's order (fold_row over the terms),
// then dx. Scratch: `a` and `b` hold the loaded rows, `t` the terms (then exp(y)). dy is of y's
// type T or (D) 16-bit, read widened.
template <typename T, typename D, typename M = MathOf<T>>
[[gnu::always_inline]] inline void softmax_grad_row(const T* y, const D* dy, T* dx, int64_t n,
                                                    bool log_softmax, std::vector<M>& a,
                                                    std::vector<M>& b, std::vector<M>& t) {
  const M* v = load_row(y, n, a);
  const M* d = load_row(dy, n, b);
  t.resize(n);
  const sh::RowPlan plan = sh::row_plan(n);
  if (log_softmax) {
    const M s = fold_row(plan, d, n, M(0), SumOf());
    exp_array(v, n, t.data());
    for (int64_t j = 0; j < n; ++j)
      dx[j] = sh::Elem<T>::store(sh::log_softmax_grad_value(d[j], t[j], s));
    return;
  }
  for (int64_t j = 0; j < n; ++j) t[j] = sh::softmax_grad_term(d[j], v[j]);
  const M s = fold_row(plan, t.data(), n, M(0), SumOf());
  for (int64_t j = 0; j < n; ++j) dx[j] = sh::Elem<T>::store(sh::softmax_grad_value(d[j], v[j], s));
}

// Rows [begin, end) of n (inner == 1) of f32 y with the loops on AVX-512 (row_host.h); dy f32 or
// bf16.
template <typename D>
AMPC_AVX512_LOOPS void softmax_grad_rows_f32_avx512(const float* y, const D* dy, float* dx,
                                                    int64_t begin, int64_t end, int64_t n,
                                                    bool log_softmax, std::vector<float>& a,
                                                    std::vector<float>& b, std::vector<float>& t) {
  for (int64_t o = begin; o < end; ++o) {
    softmax_grad_row(y + o * n, dy + o * n, dx + o * n, n, log_softmax, a, b, t);
  }
}

// inner > 1: one thread per column walks the n rows in order.
template <typename T, typename D, typename M = MathOf<T>>
void softmax_grad_column(const T* y, const D* dy, T* dx, int64_t n, int64_t inner, bool log_softmax,
                         std::vector<M>& a, std::vector<M>& b, std::vector<M>& t) {
  std::vector<M> s(inner, M(0));
  for (int64_t r = 0; r < n; ++r) {
    const M* d = load_row(dy + r * inner, inner, b);
    if (log_softmax) {
      for (int64_t i = 0; i < inner; ++i) s[i] = sh::add(s[i], d[i]);
    } else {
      const M* v = load_row(y + r * inner, inner, a);
      for (int64_t i = 0; i < inner; ++i) s[i] = sh::add(s[i], sh::softmax_grad_term(d[i], v[i]));
    }
  }
  t.resize(inner);
  for (int64_t r = 0; r < n; ++r) {
    const M* v = load_row(y + r * inner, inner, a);
    const M* d = load_row(dy + r * inner, inner, b);
    T* out = dx + r * inner;
    if (log_softmax) {
      exp_array(v, inner, t.data());
      for (int64_t i = 0; i < inner; ++i)
        out[i] = sh::Elem<T>::store(sh::log_softmax_grad_value(d[i], t[i], s[i]));
    } else {
      for (int64_t i = 0; i < inner; ++i)
        out[i] = sh::Elem<T>::store(sh::softmax_grad_value(d[i], v[i], s[i]));
    }
  }
}

// The rows of any type pair (dY of y's type, or 16-bit with f32 y).
template <typename T, typename D>
void softmax_grad_typed(const T* y, const D* dy, T* dx, int64_t outer, int64_t n, int64_t inner,
                        bool log_softmax, bool vector_loops) {
  using M = MathOf<T>;
  for_rows(outer, outer > 1 && outer * n * inner > (1 << 16), [&](int64_t begin, int64_t end) {
    std::vector<M> a, b, t;
    if constexpr (std::is_same_v<T, float> && !std::is_same_v<D, Half>) {
      if (vector_loops) {
        return softmax_grad_rows_f32_avx512(y, dy, dx, begin, end, n, log_softmax, a, b, t);
      }
    }
    for (int64_t o = begin; o < end; ++o) {
      const int64_t at = o * n * inner;
      if (inner == 1) {
        softmax_grad_row(y + at, dy + at, dx + at, n, log_softmax, a, b, t);
      } else {
        softmax_grad_column(y + at, dy + at, dx + at, n, inner, log_softmax, a, b, t);
      }
    }
  });
}

}  // namespace

void softmax_grad(DType dtype, DType dy_dtype, const void* y, const void* dy, void* dx,
                  int64_t outer, int64_t n, int64_t inner, bool log_softmax, RowLoops loops) {
  if (!sh::grad_input_fits(dy_dtype, dtype)) {
    throw Error("softmax_grad: dY of type " + std::string(dtype_name(dy_dtype)) +
                " does not fit Y of type " + std::string(dtype_name(dtype)));
  }
  const bool vector_loops = loops == RowLoops::kBest && inner == 1 && cpu_has_avx512_bw_vl();
  if (outer <= 0 || n <= 0 || inner <= 0) return;
  sh::dispatch_float_types_f64(dtype, "softmax_grad", [&](auto tag) {
    using T = decltype(tag);
    const T* yt = static_cast<const T*>(y);
    T* dxt = static_cast<T*>(dx);
    if (dy_dtype == dtype) {
      return softmax_grad_typed(yt, static_cast<const T*>(dy), dxt, outer, n, inner, log_softmax,
                                vector_loops);
    }
    if constexpr (std::is_same_v<T, float>) {  // 16-bit dY read widened
      sh::dispatch_float_types(dy_dtype, "softmax_grad", [&](auto dtag) {
        using D = decltype(dtag);
        softmax_grad_typed(yt, static_cast<const D*>(dy), dxt, outer, n, inner, log_softmax,
                           vector_loops);
      });
    }
  });
}

void softmax(DType dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
             bool log_softmax) {
  sh::dispatch_float_types_f64(dtype, "softmax", [&](auto tag) {
    using T = decltype(tag);
    using M = MathOf<T>;
    if (outer <= 0 || n <= 0 || inner <= 0) return;
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    for_rows(outer, outer > 1 && outer * n * inner > (1 << 16), [&](int64_t begin, int64_t end) {
      std::vector<M> buf, e;
      if constexpr (std::is_same_v<T, float>) {
        if (inner == 1) {  // the f32 rows in one call: no per-row dispatch
          e.resize(softmax_rows_scratch(n));
          if (softmax_rows_avx512(xt + begin * n, yt + begin * n, end - begin, n, log_softmax,
                                  e.data())) {
            return;
          }
        }
      }
      for (int64_t o = begin; o < end; ++o) {
        if (inner == 1) {
          softmax_row(xt + o * n, yt + o * n, n, log_softmax, buf, e);
        } else {
          softmax_column(xt + o * n * inner, yt + o * n * inner, n, inner, log_softmax, buf, e);
        }
      }
    });
  });
}

}  // namespace ampc::kernels::twin
