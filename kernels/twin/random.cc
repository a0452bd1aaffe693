// The kernel's per-element functor over the elements in parallel (OpenMP, static chunks; the
// draws are counter-based, so the split changes no bit), on one thread below kParallelWork.
#include "kernels/twin/random.h"

#include "kernels/shared/elementwise_dispatch.h"

namespace ampc::kernels::twin {
namespace {

namespace sh = kernels::shared;

// Smaller than Dropout's threshold: a normal draw costs a log, a cos and a sqrt.
constexpr int64_t kParallelWork = 1 << 12;

}  // namespace

void random_fill(DType dtype, void* y, int64_t n, shared::RandomDraw draw, shared::DropoutKey key) {
  if (n <= 0) return;
  const bool known = sh::visit_float(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const sh::RandomElement<T> f{static_cast<T*>(y), key.get(), draw};
#pragma omp parallel for schedule(static) if (n >= kParallelWork)
    for (int64_t i = 0; i < n; ++i) f(i);
  });
  if (!known) sh::unsupported("random_fill", dtype);
}

}  // namespace ampc::kernels::twin
