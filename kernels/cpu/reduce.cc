#include "kernels/cpu/reduce.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/elementwise_types.h"

namespace ampc::kernels::cpu {
namespace {

// Math of integer reductions (sqrt, log, exp) happens in double.
template <typename T>
using MathT = std::conditional_t<std::is_floating_point_v<T>, T, double>;

template <typename T>
T lowest() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::lowest();
}
template <typename T>
T highest() {
  return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::max();
}

template <typename T>
T abs_of(T v) {
  if constexpr (std::is_signed_v<T>) {
    return v < 0 ? T(-v) : v;
  } else {
    return v;
  }
}

// A reduction: its start value, how one element joins the accumulator, and the final step.
template <typename T>
struct Sum {
  static T init() { return T(0); }
  static T add(T a, T x) { return a + x; }
  static T finish(T a, int64_t) { return a; }
};
template <typename T>
struct Mean : Sum<T> {
  static T finish(T a, int64_t n) {
    if constexpr (std::is_floating_point_v<T>) return a / static_cast<T>(n);
    return n ? static_cast<T>(a / static_cast<T>(n)) : T(0);
  }
};
template <typename T>
struct SumSquare : Sum<T> {
  static T add(T a, T x) { return a + x * x; }
};
template <typename T>
struct L1 : Sum<T> {
  static T add(T a, T x) { return a + abs_of(x); }
};
template <typename T>
struct L2 : SumSquare<T> {
  static T finish(T a, int64_t) { return static_cast<T>(std::sqrt(static_cast<MathT<T>>(a))); }
};
template <typename T>
struct LogSum : Sum<T> {
  static T finish(T a, int64_t) { return static_cast<T>(std::log(static_cast<MathT<T>>(a))); }
};
template <typename T>
struct Prod {
  static T init() { return T(1); }
  static T add(T a, T x) { return a * x; }
  static T finish(T a, int64_t) { return a; }
};
template <typename T>
struct Max {
  static T init() { return lowest<T>(); }
  static T add(T a, T x) { return (x > a || is_nan_value(x)) && !is_nan_value(a) ? x : a; }
  static T finish(T a, int64_t) { return a; }
};
template <typename T>
struct Min {
  static T init() { return highest<T>(); }
  static T add(T a, T x) { return (x < a || is_nan_value(x)) && !is_nan_value(a) ? x : a; }
  static T finish(T a, int64_t) { return a; }
};

constexpr int64_t kParallelWork = 1 << 18;

template <typename R, typename T>
void reduce_with(const T* x, int64_t outer, int64_t n, int64_t inner, T* y) {
  const bool par = outer > 1 && outer * n * inner > kParallelWork;
  if (inner == 1) {
#pragma omp parallel for if (par)
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = x + o * n;
      T a = R::init();
      for (int64_t r = 0; r < n; ++r) a = R::add(a, row[r]);
      y[o] = R::finish(a, n);
    }
    return;
  }
#pragma omp parallel for if (par)
  for (int64_t o = 0; o < outer; ++o) {
    T* yo = y + o * inner;
    for (int64_t i = 0; i < inner; ++i) yo[i] = R::init();
    for (int64_t r = 0; r < n; ++r) {
      const T* row = x + (o * n + r) * inner;
      for (int64_t i = 0; i < inner; ++i) yo[i] = R::add(yo[i], row[i]);
    }
    for (int64_t i = 0; i < inner; ++i) yo[i] = R::finish(yo[i], n);
  }
}

// log(sum(exp(x))) computed as m + log(sum(exp(x - m))) with m the maximum.
template <typename T>
void log_sum_exp(const T* x, int64_t outer, int64_t n, int64_t inner, T* y) {
  using M = MathT<T>;
  reduce_with<Max<T>>(x, outer, n, inner, y);
#pragma omp parallel for if (outer > 1 && outer * n * inner > kParallelWork)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const M m = static_cast<M>(y[o * inner + i]);
      if (std::isinf(m) || std::isnan(m)) continue;  // all -inf, some +inf, or NaN
      M s = 0;
      for (int64_t r = 0; r < n; ++r) s += std::exp(static_cast<M>(x[(o * n + r) * inner + i]) - m);
      y[o * inner + i] = static_cast<T>(m + std::log(s));
    }
  }
}

// x [n1, kept, n2] summed over n1 and n2 (BatchNorm's gradient sums over N and H*W of
// NCHW): per kept index, the n2-element runs of every n1 row, each run summed with a
// vectorised reduction; no transposed copy of x.
template <typename T>
void sum_outer_and_inner(const T* x, int64_t n1, int64_t kept, int64_t n2, bool mean, T* y) {
#pragma omp parallel for if (kept > 1 && n1 * kept * n2 > kParallelWork)
  for (int64_t k = 0; k < kept; ++k) {
    T total = 0;
    for (int64_t a = 0; a < n1; ++a) {
      const T* run = x + (a * kept + k) * n2;
      T s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < n2; ++i) s += run[i];
      total += s;
    }
    y[k] = mean ? total / static_cast<T>(n1 * n2) : total;
  }
}

}  // namespace

template <typename T>
void reduce_axis(ReduceKind kind, const T* x, int64_t outer, int64_t n, int64_t inner, T* y) {
  switch (kind) {
    case ReduceKind::kSum:
      return reduce_with<Sum<T>>(x, outer, n, inner, y);
    case ReduceKind::kMean:
      return reduce_with<Mean<T>>(x, outer, n, inner, y);
    case ReduceKind::kProd:
      return reduce_with<Prod<T>>(x, outer, n, inner, y);
    case ReduceKind::kMax:
      return reduce_with<Max<T>>(x, outer, n, inner, y);
    case ReduceKind::kMin:
      return reduce_with<Min<T>>(x, outer, n, inner, y);
    case ReduceKind::kL1:
      return reduce_with<L1<T>>(x, outer, n, inner, y);
    case ReduceKind::kL2:
      return reduce_with<L2<T>>(x, outer, n, inner, y);
    case ReduceKind::kLogSum:
      return reduce_with<LogSum<T>>(x, outer, n, inner, y);
    case ReduceKind::kSumSquare:
      return reduce_with<SumSquare<T>>(x, outer, n, inner, y);
    case ReduceKind::kLogSumExp:
      return log_sum_exp(x, outer, n, inner, y);
  }
}

template <typename T>
void reduce(ReduceKind kind, const T* x, const std::vector<int64_t>& dims,
            const std::vector<bool>& reduced, T* y) {
  // Merge neighbouring axes of the same kind; axes of size 1 do not matter.
  std::vector<int64_t> size;
  std::vector<bool> red;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!size.empty() && red.back() == reduced[i]) {
      size.back() *= dims[i];
    } else {
      size.push_back(dims[i]);
      red.push_back(reduced[i]);
    }
  }
  int reduced_groups = 0;
  for (bool r : red) reduced_groups += r;
  if (reduced_groups <= 1) {  // [outer, n, inner]
    int64_t outer = 1, n = 1, inner = 1;
    bool seen = false;
    for (size_t i = 0; i < size.size(); ++i) {
      if (red[i]) {
        n = size[i];
        seen = true;
      } else {
        (seen ? inner : outer) *= size[i];
      }
    }
    return reduce_axis(kind, x, outer, n, inner, y);
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (size.size() == 3 && red[0] && !red[1] && red[2] &&
        (kind == ReduceKind::kSum || kind == ReduceKind::kMean)) {
      return sum_outer_and_inner(x, size[0], size[1], size[2], kind == ReduceKind::kMean, y);
    }
  }
  // Several reduced groups: move the kept axes to the front, then reduce the tail.
  std::vector<int> perm;
  int64_t outer = 1, n = 1;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < size.size(); ++i) {
      if (red[i] != (pass == 1)) continue;
      perm.push_back(static_cast<int>(i));
      (pass == 1 ? n : outer) *= size[i];
    }
  }
  std::vector<T> tmp(static_cast<size_t>(outer * n));
  permute_copy(x, size, perm, tmp.data());
  reduce_axis(kind, tmp.data(), outer, n, int64_t{1}, y);
}

template <typename T>
void arg_reduce(const T* x, int64_t outer, int64_t n, int64_t inner, bool is_max, bool select_last,
                int64_t* y) {
#pragma omp parallel for if (outer > 1 && outer * n * inner > kParallelWork)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T* p = x + o * n * inner + i;
      T best = p[0];
      int64_t arg = 0;
      for (int64_t r = 1; r < n; ++r) {
        const T v = p[r * inner];
        // A NaN is the maximum and the minimum, as in PyTorch: the first NaN wins (the last
        // with select_last); comparisons alone would skip it, or keep one at index 0.
        const bool v_nan = is_nan_value(v), best_nan = is_nan_value(best);
        const bool better = best_nan ? false : v_nan || (is_max ? v > best : v < best);
        const bool tie = best_nan ? v_nan : v == best;
        if (better || (select_last && tie)) {
          best = v;
          arg = r;
        }
      }
      y[o * inner + i] = arg;
    }
  }
}

template <typename T>
void permute_copy(const T* x, const std::vector<int64_t>& dims, const std::vector<int>& perm,
                  T* out) {
  const size_t rank = dims.size();
  std::vector<int64_t> in_stride(rank, 1);
  for (size_t i = rank; i-- > 1;) in_stride[i - 1] = in_stride[i] * dims[i];
  std::vector<int64_t> odims(rank), ostride(rank);
  int64_t total = 1;
  for (size_t i = 0; i < rank; ++i) {
    odims[i] = dims[perm[i]];
    ostride[i] = in_stride[perm[i]];
    total *= odims[i];
  }
  if (total == 0) return;
  if (rank == 0) {
    out[0] = x[0];
    return;
  }
  // Odometer over the output; the innermost output axis is a strided read.
  std::vector<int64_t> idx(rank, 0);
  const int64_t last = odims[rank - 1], last_stride = ostride[rank - 1];
  int64_t src = 0;
  for (int64_t j = 0; j < total; j += last) {
    for (int64_t k = 0; k < last; ++k) out[j + k] = x[src + k * last_stride];
    for (size_t d = rank - 1; d-- > 0;) {
      src += ostride[d];
      if (++idx[d] < odims[d]) break;
      src -= ostride[d] * odims[d];
      idx[d] = 0;
    }
  }
}

#define AMPC_INSTANTIATE_REDUCE(T)                                           \
  template void reduce<T>(ReduceKind, const T*, const std::vector<int64_t>&, \
                          const std::vector<bool>&, T*);                     \
  template void reduce_axis<T>(ReduceKind, const T*, int64_t, int64_t, int64_t, T*);
#define AMPC_INSTANTIATE_ARG(T)                                                           \
  template void arg_reduce<T>(const T*, int64_t, int64_t, int64_t, bool, bool, int64_t*); \
  template void permute_copy<T>(const T*, const std::vector<int64_t>&, const std::vector<int>&, T*);
AMPC_INSTANTIATE_REDUCE(float)
AMPC_INSTANTIATE_REDUCE(double)
AMPC_INSTANTIATE_REDUCE(int8_t)
AMPC_INSTANTIATE_REDUCE(uint8_t)
AMPC_INSTANTIATE_REDUCE(int32_t)
AMPC_INSTANTIATE_REDUCE(int64_t)
AMPC_INSTANTIATE_REDUCE(uint32_t)
AMPC_INSTANTIATE_REDUCE(uint64_t)
AMPC_INSTANTIATE_ARG(float)
AMPC_INSTANTIATE_ARG(double)
AMPC_INSTANTIATE_ARG(int8_t)
AMPC_INSTANTIATE_ARG(uint8_t)
AMPC_INSTANTIATE_ARG(int16_t)
AMPC_INSTANTIATE_ARG(uint16_t)
AMPC_INSTANTIATE_ARG(int32_t)
AMPC_INSTANTIATE_ARG(int64_t)
AMPC_INSTANTIATE_ARG(uint32_t)
AMPC_INSTANTIATE_ARG(uint64_t)
#undef AMPC_INSTANTIATE_REDUCE
#undef AMPC_INSTANTIATE_ARG

}  // namespace ampc::kernels::cpu
