#include "kernels/twin/row_op.h"

#include <vector>

#include "base/error.h"
#include "kernels/shared/rowwise_dispatch.h"
#include "kernels/twin/row_host.h"

namespace ampc::kernels::twin {
namespace {

using sh::RowArgs;

// inner == 1: each row as a block (or warp) of the kernel reduces it (fold_row: the kernel's
// partition and tree), then the outputs.
template <typename Spec, typename T, typename M = MathOf<T>>
void rows(const T* x, T* y, int64_t outer, int64_t n, const RowArgs& a) {
  const sh::RowPlan plan = sh::row_plan(n);
  for_rows(outer, outer > 1 && outer * n > (1 << 16), [&](int64_t begin, int64_t end) {
    std::vector<M> buf, terms(static_cast<size_t>(n));
    for (int64_t r = begin; r < end; ++r) {
      const M* v = load_row(x + r * n, n, buf);
      M stats[sh::stats_size<Spec>()] = {};
      for (int k = 0; k < Spec::kPasses; ++k) {
        for (int64_t j = 0; j < n; ++j) terms[j] = Spec::term(k, v[j], stats, a);
        const M total =
            fold_row(plan, terms.data(), n, Spec::template init<M>(k), sh::PassCombine<Spec>{k});
        stats[k] = Spec::finish(k, total, n, a);
      }
      T* yr = y + r * n;  // may be x's row: v[j] is read before yr[j] is written
      for (int64_t j = 0; j < n; ++j) yr[j] = sh::Elem<T>::store(Spec::value(v[j], stats, a));
    }
  });
}

// inner > 1: one thread of the kernel per column walks its n elements in order.
template <typename Spec, typename T, typename M = MathOf<T>>
void columns(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, const RowArgs& a) {
  constexpr int kStats = sh::stats_size<Spec>();
  for_rows(outer, outer > 1 && outer * n * inner > (1 << 16), [&](int64_t begin, int64_t end) {
    std::vector<M> buf, stats(static_cast<size_t>(inner * kStats)), acc(static_cast<size_t>(inner));
    for (int64_t o = begin; o < end; ++o) {
      const T* xo = x + o * n * inner;
      T* yo = y + o * n * inner;
      for (int k = 0; k < Spec::kPasses; ++k) {
        for (int64_t i = 0; i < inner; ++i) acc[i] = Spec::template init<M>(k);
        for (int64_t r = 0; r < n; ++r) {
          const M* v = load_row(xo + r * inner, inner, buf);
          for (int64_t i = 0; i < inner; ++i)
            acc[i] = Spec::combine(k, acc[i], Spec::term(k, v[i], &stats[i * kStats], a));
        }
        for (int64_t i = 0; i < inner; ++i) stats[i * kStats + k] = Spec::finish(k, acc[i], n, a);
      }
      for (int64_t r = 0; r < n; ++r) {
        const M* v = load_row(xo + r * inner, inner, buf);
        T* yr = yo + r * inner;
        for (int64_t i = 0; i < inner; ++i)
          yr[i] = sh::Elem<T>::store(Spec::value(v[i], &stats[i * kStats], a));
      }
    }
  });
}

template <typename Spec>
void run(DType dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
         const RowArgs& a) {
  sh::dispatch_float_types_f64(dtype, Spec::kOp, [&](auto tag) {
    using T = decltype(tag);
    if (outer <= 0 || n <= 0 || inner <= 0) return;
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    if (inner == 1) return rows<Spec>(xt, yt, outer, n, a);
    columns<Spec>(xt, yt, outer, n, inner, a);
  });
}

}  // namespace

void row_op(sh::RowOp op, DType dtype, const void* x, void* y, int64_t outer, int64_t n,
            int64_t inner, const RowArgs& args) {
  const bool known = sh::visit_row_op(
      op, [&](auto spec) { run<decltype(spec)>(dtype, x, y, outer, n, inner, args); });
  if (!known) throw Error("row_op: unknown row op " + std::to_string(static_cast<int>(op)));
}

}  // namespace ampc::kernels::twin
