#include "kernels/twin/row_op.h"

#include <vector>

#include "base/error.h"
#include "kernels/shared/rowwise_dispatch.h"
#include "kernels/twin/row_host.h"

namespace ampc::kernels::twin {
namespace {

using sh::RowArgs;
using sh::RowOperands;

// The op's per-channel operands in the compute type, operand k at [k * channels].
template <typename Spec, typename M>
std::vector<M> load_operands(const RowOperands& ops, bool f64) {
  std::vector<M> out;
  if constexpr (Spec::kRowOperands > 0) {
    const auto c = static_cast<size_t>(ops.channels);
    out.resize(Spec::kRowOperands * c);
    auto load = [&](auto tag) {
      using P = decltype(tag);
      for (int k = 0; k < Spec::kRowOperands; ++k) {
        const P* p = static_cast<const P*>(ops.data[k]);
        if (!p)
          throw Error(std::string(Spec::kOp) + ": operand " + std::to_string(k + 1) +
                      " is missing");
        for (size_t i = 0; i < c; ++i) out[k * c + i] = static_cast<M>(sh::Elem<P>::load(p[i]));
      }
    };
    if (f64) {
      if (ops.dtype != DType::kFloat64)
        throw Error(std::string(Spec::kOp) + ": an f64 input needs f64 operands");
      load(double{});
    } else {
      sh::dispatch_float_types(ops.dtype, Spec::kOp, load);
    }
  }
  return out;
}

// Row r's operands (entry r % channels of each) into per_row.
template <typename Spec, typename M>
void row_operands(const std::vector<M>& all, int64_t channels, int64_t r, M* per_row) {
  for (int k = 0; k < Spec::kRowOperands; ++k) per_row[k] = all[k * channels + r % channels];
}

// inner == 1: each row as a block (or warp) of the kernel reduces it (fold_row: the kernel's
// partition and tree), then the outputs.
template <typename Spec, typename T, typename M = MathOf<T>>
void rows(const T* x, T* y, int64_t outer, int64_t n, const RowArgs& a,
          const std::vector<M>& operands, int64_t channels) {
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
      M per_row[sh::row_operands_size<Spec>()] = {};
      row_operands<Spec>(operands, channels, r, per_row);
      T* yr = y + r * n;  // may be x's row: v[j] is read before yr[j] is written
      for (int64_t j = 0; j < n; ++j)
        yr[j] = sh::Elem<T>::store(Spec::value(v[j], stats, per_row, a));
    }
  });
}

// inner > 1: one thread of the kernel per column walks its n elements in order.
template <typename Spec, typename T, typename M = MathOf<T>>
void columns(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, const RowArgs& a,
             const std::vector<M>& operands, int64_t channels) {
  constexpr int kStats = sh::stats_size<Spec>(), kOperands = sh::row_operands_size<Spec>();
  for_rows(outer, outer > 1 && outer * n * inner > (1 << 16), [&](int64_t begin, int64_t end) {
    std::vector<M> buf, stats(static_cast<size_t>(inner * kStats)), acc(static_cast<size_t>(inner));
    std::vector<M> per_row(static_cast<size_t>(inner * kOperands));
    for (int64_t o = begin; o < end; ++o) {
      const T* xo = x + o * n * inner;
      T* yo = y + o * n * inner;
      for (int64_t i = 0; i < inner; ++i)
        row_operands<Spec>(operands, channels, o * inner + i, &per_row[i * kOperands]);
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
          yr[i] =
              sh::Elem<T>::store(Spec::value(v[i], &stats[i * kStats], &per_row[i * kOperands], a));
      }
    }
  });
}

template <typename Spec>
void run(DType dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
         const RowArgs& a, const RowOperands& ops) {
  sh::dispatch_float_types_f64(dtype, Spec::kOp, [&](auto tag) {
    using T = decltype(tag);
    using M = MathOf<T>;
    if (outer <= 0 || n <= 0 || inner <= 0) return;
    if (Spec::kRowOperands > 0 && ops.channels <= 0)
      throw Error(std::string(Spec::kOp) + ": no channels for the per-channel operands");
    const std::vector<M> operands = load_operands<Spec, M>(ops, dtype == DType::kFloat64);
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    if (inner == 1) return rows<Spec>(xt, yt, outer, n, a, operands, ops.channels);
    columns<Spec>(xt, yt, outer, n, inner, a, operands, ops.channels);
  });
}

}  // namespace

void row_op(sh::RowOp op, DType dtype, const void* x, void* y, int64_t outer, int64_t n,
            int64_t inner, const RowArgs& args, const RowOperands& operands) {
  const bool known = sh::visit_row_op(
      op, [&](auto spec) { run<decltype(spec)>(dtype, x, y, outer, n, inner, args, operands); });
  if (!known) throw Error("row_op: unknown row op " + std::to_string(static_cast<int>(op)));
}

}  // namespace ampc::kernels::twin
