#include "kernels/cpu/loss.h"

namespace ampc::kernels::cpu {

template <typename T, typename L>
int64_t nll_loss(const T* logp, const L* target, int64_t n, int64_t c, int64_t d, const T* weight,
                 bool has_ignore, int64_t ignore_index, LossReduction reduction, T* out) {
  T sum = 0, weight_sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      const int64_t pos = i * d + j;
      const int64_t t = static_cast<int64_t>(target[pos]);
      T loss = 0;
      if (!(has_ignore && t == ignore_index)) {
        if (t < 0 || t >= c) return pos;
        const T w = weight ? weight[t] : T(1);
        loss = -logp[(i * c + t) * d + j] * w;
        weight_sum += w;
      }
      if (reduction == LossReduction::kNone) {
        out[pos] = loss;
      } else {
        sum += loss;
      }
    }
  }
  if (reduction == LossReduction::kSum) out[0] = sum;
  if (reduction == LossReduction::kMean) out[0] = sum / weight_sum;
  return -1;
}

template int64_t nll_loss<float, int32_t>(const float*, const int32_t*, int64_t, int64_t, int64_t,
                                          const float*, bool, int64_t, LossReduction, float*);
template int64_t nll_loss<float, int64_t>(const float*, const int64_t*, int64_t, int64_t, int64_t,
                                          const float*, bool, int64_t, LossReduction, float*);
template int64_t nll_loss<double, int32_t>(const double*, const int32_t*, int64_t, int64_t, int64_t,
                                           const double*, bool, int64_t, LossReduction, double*);
template int64_t nll_loss<double, int64_t>(const double*, const int64_t*, int64_t, int64_t, int64_t,
                                           const double*, bool, int64_t, LossReduction, double*);

}  // namespace ampc::kernels::cpu
