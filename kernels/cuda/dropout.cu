// One thread per element (grid-stride), each resolving the step's key once.
#include "kernels/cuda/data_launch.cuh"
#include "kernels/cuda/dropout.h"
#include "kernels/shared/elementwise_dispatch.h"

namespace ampc::kernels::cuda {
namespace {

namespace sh = kernels::shared;

template <typename T>
__global__ void dropout_kernel(sh::DropoutElement<T> f, sh::DropoutKey key, int64_t n) {
  f.key = key.get();
  AMPC_GRID_STRIDE(int64_t, i, n) f(i);
}

}  // namespace

void dropout(DType dtype, const void* x, void* y, bool* mask, void* mask_values, int64_t n,
             double ratio, bool training, shared::DropoutKey key, cudaStream_t stream) {
  if (n <= 0) return;
  const bool known = sh::visit_float(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dropout_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(
        sh::dropout_element<T>(x, y, mask, mask_values, ratio, training), key, n);
    detail::check_launch("dropout");
  });
  if (!known) sh::unsupported("dropout", dtype);
}

}  // namespace ampc::kernels::cuda
