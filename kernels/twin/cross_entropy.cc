#include "kernels/twin/cross_entropy.h"

#include <string>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "kernels/shared/rowwise_dispatch.h"
#include "kernels/twin/row_host.h"

namespace ampc::kernels::twin {
namespace {

// One sample i: its scores x[(i * c + k) * d + j], class k, position j. d == 1: the c scores
// are a row that a block (or warp) of the kernel reduces; d > 1: one thread per position walks
// the classes in order. Writes the log-probabilities (when wanted) and, per position, the loss
// and the weight it adds to the mean's denominator.
template <typename T, typename O, typename L, typename W, typename M = MathOf<T>>
void sample(const T* x, const L* labels, int64_t c, int64_t d, const W* weight, bool has_ignore,
            int64_t ignore_index, O* log_prob, M* loss, M* w_out, std::vector<M>& buf,
            std::vector<M>& e, std::vector<M>& m, std::vector<M>& log_s) {
  m.resize(d);
  log_s.resize(d);
  if (d == 1) {
    const M* v = load_row(x, c, buf);
    e.resize(c);
    row_softmax_stats(v, c, e.data(), &m[0], &log_s[0]);
  } else {
    e.resize(d);
    column_softmax_stats(x, c, d, m.data(), log_s.data(), buf, e.data());
  }
  for (int64_t j = 0; j < d; ++j) log_s[j] = log_of(log_s[j]);
  // (x - m) - log(sum), as kernels/shared/rowwise.h's log_softmax_value, in M.
  auto log_softmax_of = [](const T& v, M mj, M log_sj) {
    return sh::sub(sh::sub(static_cast<M>(sh::Elem<T>::load(v)), mj), log_sj);
  };
  auto log_softmax_at = [&](int64_t k, int64_t j) {
    return log_softmax_of(x[k * d + j], m[j], log_s[j]);
  };
  if (log_prob && d == 1) {  // one row, its statistics hoisted: a loop the compiler vectorises
    const M m0 = m[0], log_s0 = log_s[0];
    for (int64_t k = 0; k < c; ++k)
      log_prob[k] = sh::Elem<O>::store(log_softmax_of(x[k], m0, log_s0));
  } else if (log_prob) {
    for (int64_t k = 0; k < c; ++k)
      for (int64_t j = 0; j < d; ++j)
        log_prob[k * d + j] = sh::Elem<O>::store(log_softmax_at(k, j));
  }
  for (int64_t j = 0; j < d; ++j) {
    const int64_t label = static_cast<int64_t>(labels[j]);
    switch (sh::label_status(label, c, has_ignore, ignore_index)) {
      case 0: {
        const M w = weight ? static_cast<M>(sh::Elem<W>::load(weight[label])) : M(1);
        loss[j] = sh::mul(-log_softmax_at(label, j), w);  // sh::nll_value
        w_out[j] = w;
        break;
      }
      case 1:
        loss[j] = M(0);
        w_out[j] = M(0);
        break;
      default:
        loss[j] = static_cast<M>(sh::quiet_nan());
        w_out[j] = M(0);
    }
  }
}

// O: the type of the loss and log-probabilities, T's or (16-bit T) float: the scores read
// widened, the numbers of a Cast to float before the op (M is float for either).
template <typename T, typename O, typename L, typename W, typename M = MathOf<T>>
void run(const T* x, const L* labels, int64_t n, int64_t c, int64_t d, const W* weight,
         bool has_ignore, int64_t ignore_index, CeReduction reduction, O* loss, O* log_prob,
         M* ws) {
  const int64_t positions = n * d;
  std::vector<M> own;  // kNone: the per-position values before they are stored
  if (reduction == CeReduction::kNone) {
    own.resize(2 * positions);
    ws = own.data();
  }
  M* ws_loss = ws;
  M* ws_w = ws + positions;
  for_rows(n, n > 1 && positions * c > (1 << 16), [&](int64_t begin, int64_t end) {
    std::vector<M> buf, e, m, log_s;
    for (int64_t i = begin; i < end; ++i) {
      sample(x + i * c * d, labels + i * d, c, d, weight, has_ignore, ignore_index,
             log_prob ? log_prob + i * c * d : nullptr, ws_loss + i * d, ws_w + i * d, buf, e, m,
             log_s);
    }
  });
  if (reduction == CeReduction::kNone) {
    for (int64_t p = 0; p < positions; ++p) loss[p] = sh::Elem<O>::store(ws_loss[p]);
    return;
  }
  const sh::RowPlan plan = sh::row_plan(positions);
  const M sum = fold_row(plan, ws_loss, positions, M(0), SumOf());
  if (reduction == CeReduction::kSum) {
    loss[0] = sh::Elem<O>::store(sum);
    return;
  }
  const M wsum = fold_row(plan, ws_w, positions, M(0), SumOf());
  loss[0] = sh::Elem<O>::store(sh::div(sum, wsum));
}

}  // namespace

void softmax_cross_entropy(DType dtype, const void* scores, DType label_dtype, const void* labels,
                           int64_t n, int64_t c, int64_t d, DType weight_dtype, const void* weight,
                           bool has_ignore_index, int64_t ignore_index, CeReduction reduction,
                           void* loss, void* log_prob, void* workspace, int32_t* bad_label,
                           DType out_dtype) {
  if (sh::ce_output_type(dtype, out_dtype) == DType::kUndefined) {
    throw Error("softmax_cross_entropy: " + std::string(dtype_name(out_dtype)) + " outputs for " +
                std::string(dtype_name(dtype)) + " scores (only 16-bit scores widen, to float)");
  }
  const bool widened = sh::ce_output_type(dtype, out_dtype) != dtype;
  sh::dispatch_float_types_f64(dtype, "softmax_cross_entropy scores", [&](auto xt) {
    sh::dispatch_label_types(label_dtype, "softmax_cross_entropy labels", [&](auto lt) {
      using T = decltype(xt);
      using L = decltype(lt);
      using M = MathOf<T>;
      // The kernel's flag: set by any position whose label is out of range.
      for (int64_t p = 0; bad_label && p < n * d; ++p) {
        const auto label = static_cast<int64_t>(static_cast<const L*>(labels)[p]);
        if (sh::label_status(label, c, has_ignore_index, ignore_index) == 2) *bad_label = 1;
      }
      // f64 (the CPU op only) keeps its partials in f64, in its own buffer.
      std::vector<M> partials;
      M* ws = static_cast<M*>(workspace);
      if constexpr (!std::is_same_v<M, float>) {
        if (reduction != CeReduction::kNone) {
          partials.resize(2 * n * d);
          ws = partials.data();
        }
      }
      auto with_weight = [&](auto wt) {
        using W = decltype(wt);
        auto outputs = [&](auto ot) {
          using O = decltype(ot);
          run(static_cast<const T*>(scores), static_cast<const L*>(labels), n, c, d,
              static_cast<const W*>(weight), has_ignore_index, ignore_index, reduction,
              static_cast<O*>(loss), static_cast<O*>(log_prob), ws);
        };
        if constexpr (std::is_same_v<M, float>) {
          if (widened) return outputs(float{});
        }
        outputs(T{});
      };
      if constexpr (std::is_same_v<T, double>) {
        if (weight && weight_dtype != DType::kFloat64) {
          throw Error("softmax_cross_entropy: f64 scores need f64 weights");
        }
        with_weight(double{});
      } else {
        sh::dispatch_float_types(weight ? weight_dtype : dtype, "softmax_cross_entropy weight",
                                 with_weight);
      }
    });
  });
}

}  // namespace ampc::kernels::twin
