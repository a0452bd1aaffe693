// One thread per element (grid-stride), each resolving the step's key once.
#include "kernels/cuda/data_launch.cuh"
#include "kernels/cuda/random.h"
#include "kernels/shared/elementwise_dispatch.h"

namespace ampc::kernels::cuda {
namespace {

namespace sh = kernels::shared;

template <typename T>
__global__ void random_kernel(sh::RandomElement<T> f, sh::DropoutKey key, int64_t n) {
  f.key = key.get();
  AMPC_GRID_STRIDE(int64_t, i, n) f(i);
}

}  // namespace

void random_fill(DType dtype, void* y, int64_t n, shared::RandomDraw draw, shared::DropoutKey key,
                 cudaStream_t stream) {
  if (n <= 0) return;
  const bool known = sh::visit_float(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const sh::RandomElement<T> f{static_cast<T*>(y), 0, draw};
    random_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(f, key, n);
    detail::check_launch("random_fill");
  });
  if (!known) sh::unsupported("random_fill", dtype);
}

}  // namespace ampc::kernels::cuda
