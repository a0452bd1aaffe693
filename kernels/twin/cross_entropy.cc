#include "kernels/twin/cross_entropy.h"

#include "kernels/shared/rowwise.h"
#include "kernels/shared/rowwise_dispatch.h"
#include "kernels/shared/rowwise_tree.h"

namespace ampc::kernels::twin {
namespace {

namespace sh = kernels::shared;

// Position (i, j): its class scores are x[(i * c + k) * d + j], k in [0, c). d == 1: a row as a
// block (or warp) of the kernel reduces it; d > 1: one thread walks the classes in order.
template <typename T, typename L, typename W>
void position(const T* x, const L* labels, int64_t i, int64_t j, int64_t c, int64_t d,
              const W* weight, bool has_ignore, int64_t ignore_index, T* log_prob, float* loss,
              float* w_out) {
  const T* base = x + i * c * d + j;
  auto load = [&](int64_t k) { return sh::load_f(base, k * d); };
  float m = sh::kNegInf, s = 0.0f;
  if (d == 1) {
    const sh::RowPlan plan = sh::row_plan(c);
    m = sh::row_reduce_host(
        plan, c, sh::kNegInf, [&](float a, int64_t k) { return sh::MaxCombine()(a, load(k)); },
        sh::MaxCombine());
    s = sh::row_reduce_host(
        plan, c, 0.0f, [&](float a, int64_t k) { return sh::add(a, sh::exp_shifted(load(k), m)); },
        sh::SumCombine());
  } else {
    for (int64_t k = 0; k < c; ++k) m = sh::MaxCombine()(m, load(k));
    for (int64_t k = 0; k < c; ++k) s = sh::add(s, sh::exp_shifted(load(k), m));
  }
  const float log_s = sh::log_f(s);
  if (log_prob) {
    T* out = log_prob + i * c * d + j;
    for (int64_t k = 0; k < c; ++k)
      sh::store_f(out, k * d, sh::log_softmax_value(load(k), m, log_s));
  }
  const int64_t label = static_cast<int64_t>(labels[i * d + j]);
  switch (sh::label_status(label, c, has_ignore, ignore_index)) {
    case 0: {
      const float w = weight ? sh::load_f(weight, label) : 1.0f;
      *loss = sh::nll_value(sh::log_softmax_value(load(label), m, log_s), w);
      *w_out = w;
      break;
    }
    case 1:
      *loss = 0.0f;
      *w_out = 0.0f;
      break;
    default:
      *loss = sh::quiet_nan();
      *w_out = 0.0f;
  }
}

template <typename T, typename L, typename W>
void run(const T* x, const L* labels, int64_t n, int64_t c, int64_t d, const W* weight,
         bool has_ignore, int64_t ignore_index, CeReduction reduction, T* loss, T* log_prob,
         float* ws) {
  const int64_t positions = n * d;
  float* ws_loss = ws;
  float* ws_w = ws ? ws + positions : nullptr;
#pragma omp parallel for if (positions * c > (1 << 16))
  for (int64_t p = 0; p < positions; ++p) {
    float l, w;
    position(x, labels, p / d, p % d, c, d, weight, has_ignore, ignore_index, log_prob, &l, &w);
    if (reduction == CeReduction::kNone) {
      sh::store_f(loss, p, l);
    } else {
      ws_loss[p] = l;
      ws_w[p] = w;
    }
  }
  if (reduction == CeReduction::kNone) return;
  const sh::RowPlan plan = sh::row_plan(positions);
  const float sum = sh::row_reduce_host(
      plan, positions, 0.0f, [&](float a, int64_t p) { return sh::add(a, ws_loss[p]); },
      sh::SumCombine());
  if (reduction == CeReduction::kSum) return sh::store_f(loss, 0, sum);
  const float wsum = sh::row_reduce_host(
      plan, positions, 0.0f, [&](float a, int64_t p) { return sh::add(a, ws_w[p]); },
      sh::SumCombine());
  sh::store_f(loss, 0, sh::div(sum, wsum));
}

}  // namespace

void softmax_cross_entropy(DType dtype, const void* scores, DType label_dtype, const void* labels,
                           int64_t n, int64_t c, int64_t d, DType weight_dtype, const void* weight,
                           bool has_ignore_index, int64_t ignore_index, CeReduction reduction,
                           void* loss, void* log_prob, void* workspace, int32_t* bad_label) {
  sh::dispatch_float_types(dtype, "softmax_cross_entropy scores", [&](auto xt) {
    sh::dispatch_label_types(label_dtype, "softmax_cross_entropy labels", [&](auto lt) {
      using L = decltype(lt);
      // The kernel's flag: set by any position whose label is out of range.
      for (int64_t p = 0; bad_label && p < n * d; ++p) {
        const auto label = static_cast<int64_t>(static_cast<const L*>(labels)[p]);
        if (sh::label_status(label, c, has_ignore_index, ignore_index) == 2) *bad_label = 1;
      }
      sh::dispatch_float_types(
          weight ? weight_dtype : dtype, "softmax_cross_entropy weight", [&](auto wt) {
            using T = decltype(xt);
            using W = decltype(wt);
            run(static_cast<const T*>(scores), static_cast<const L*>(labels), n, c, d,
                static_cast<const W*>(weight), has_ignore_index, ignore_index, reduction,
                static_cast<T*>(loss), static_cast<T*>(log_prob), static_cast<float*>(workspace));
          });
    });
  });
}

}  // namespace ampc::kernels::twin
