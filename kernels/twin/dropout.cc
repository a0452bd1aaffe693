// The kernel's per-element functor over the elements in parallel (OpenMP, static chunks; the
// draws are counter-based, so the split changes no bit), on one thread below kParallelWork.
#include "kernels/twin/dropout.h"

#include "kernels/shared/elementwise_dispatch.h"

namespace ampc::kernels::twin {
namespace {

namespace sh = kernels::shared;

constexpr int64_t kParallelWork = 1 << 15;

}  // namespace

void dropout(DType dtype, const void* x, void* y, bool* mask, void* mask_values, int64_t n,
             double ratio, bool training, shared::DropoutKey key) {
  if (n <= 0) return;
  const bool known = sh::visit_float(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    sh::DropoutElement<T> f = sh::dropout_element<T>(x, y, mask, mask_values, ratio, training);
    f.key = key.get();
#pragma omp parallel for schedule(static) if (n >= kParallelWork)
    for (int64_t i = 0; i < n; ++i) f(i);
  });
  if (!known) sh::unsupported("dropout", dtype);
}

}  // namespace ampc::kernels::twin
