// A block row per plane (n * c of them, grid-stride along y), its elements along x: the
// channel's bias is loaded once per plane.
#include "kernels/cuda/bias.h"
#include "kernels/cuda/data_launch.cuh"
#include "kernels/shared/rowwise_dispatch.h"
#include "kernels/shared/rowwise_fp.h"

namespace ampc::kernels::cuda {
namespace {

namespace sh = kernels::shared;

template <typename T>
__global__ void channel_bias_kernel(T* __restrict__ y, const T* __restrict__ b, int64_t c,
                                    int64_t spatial, int64_t planes) {
  for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
    const float bv = sh::load_f(b, pl % c);
    T* yp = y + pl * spatial;
    AMPC_GRID_STRIDE(int64_t, j, spatial)
    sh::store_f(yp, j, sh::add(sh::load_f(yp, j), bv));
  }
}

}  // namespace

void add_channel_bias(DType dtype, void* y, const void* b, int64_t n, int64_t c, int64_t spatial,
                      cudaStream_t stream) {
  const int64_t planes = n * c;
  if (planes <= 0 || spatial <= 0) return;
  const int64_t per_plane = (spatial + detail::kThreads - 1) / detail::kThreads;
  const dim3 grid(static_cast<unsigned>(per_plane > 64 ? 64 : per_plane),
                  static_cast<unsigned>(planes > 65535 ? 65535 : planes));
  sh::dispatch_float_types(dtype, "add_channel_bias", [&](auto tag) {
    using T = decltype(tag);
    channel_bias_kernel<T><<<grid, detail::kThreads, 0, stream>>>(
        static_cast<T*>(y), static_cast<const T*>(b), c, spatial, planes);
    detail::check_launch("add_channel_bias");
  });
}

}  // namespace ampc::kernels::cuda
