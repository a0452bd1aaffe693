// The kernel's per-element functor over the elements in parallel (OpenMP, a contiguous range a
// thread; the draws are counter-based, so the split changes no bit), on one thread below
// kParallelWork; each range on AVX-512 vectors where the CPU has them (dropout_avx512.h).
#include "kernels/twin/dropout.h"

#include <omp.h>

#include "kernels/shared/elementwise_dispatch.h"
#include "kernels/twin/dropout_avx512.h"

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
    auto range = [&f](int64_t begin, int64_t end) {
      if (!dropout_range_avx512(f, begin, end)) {
        for (int64_t i = begin; i < end; ++i) f(i);
      }
    };
    if (n < kParallelWork) return range(0, n);
#pragma omp parallel
    {
      const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      range(n * t / threads, n * (t + 1) / threads);
    }
  });
  if (!known) sh::unsupported("dropout", dtype);
}

}  // namespace ampc::kernels::twin
