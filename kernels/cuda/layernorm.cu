// LayerNormalization forward: a row per
// warp (cols < 1024) or per block of 256 / 512 threads; two reductions in rowwise_tree.h's order
// (sum for the mean, then the squared deviations), then the outputs; the row is read once into
// registers when it fits (CachedRow). Scale, bias and the statistics have run-time element types.
#include "kernels/cuda/layernorm.h"

#include "kernels/cuda/row_kernel.cuh"
#include "kernels/shared/rowwise.h"
#include "kernels/shared/rowwise_device.h"
#include "kernels/shared/rowwise_dispatch.h"

namespace ampc::kernels::cuda {
namespace {

namespace sh = kernels::shared;

struct LayerNormArgs {
  int64_t rows, cols;
  const void* scale;
  const void* bias;
  DType param_dtype;
  float eps;
  void* mean;
  void* inv_std;
  DType stat_dtype;
};

template <int kThreads, typename T, typename Src>
__device__ __forceinline__ void layer_norm_row(const Src& src, int64_t row, T* yr, float* smem,
                                               const LayerNormArgs& a) {
  const int64_t n = a.cols;
  const float s = src.fold(0.0f, [](float acc, float v) { return sh::add(acc, v); });
  const float m = sh::mean_of(sh::block_tree(s, kThreads, smem, sh::SumCombine()), n);
  const float q = src.fold(0.0f, [m](float acc, float v) { return sh::add_sq_dev(acc, v, m); });
  const float inv = sh::inv_std_of(sh::block_tree(q, kThreads, smem, sh::SumCombine()), n, a.eps);
  if (src.t == 0) {
    if (a.mean) sh::store_dyn(a.mean, row, a.stat_dtype, m);
    if (a.inv_std) sh::store_dyn(a.inv_std, row, a.stat_dtype, inv);
  }
  src.for_each([&](int64_t j, float v) {
    const float sc = a.scale ? sh::load_dyn(a.scale, j, a.param_dtype) : 0.0f;
    const float b = a.bias ? sh::load_dyn(a.bias, j, a.param_dtype) : 0.0f;
    sh::store_f(yr, j,
                sh::layer_norm_value(v, m, inv, a.scale ? &sc : nullptr, a.bias ? &b : nullptr));
  });
}

template <typename T, int kThreads>
__global__ void __launch_bounds__(sh::block_threads(kThreads))
    layer_norm_rows(const T* x, T* y, LayerNormArgs a) {
  with_block_row<kThreads>(x, a.rows, a.cols, [&](const auto& part, int64_t row, float* smem) {
    layer_norm_row<kThreads>(part, row, y + row * a.cols, smem, a);
  });
}

template <typename T>
void launch(const T* x, T* y, const LayerNormArgs& a, cudaStream_t stream) {
  switch (sh::row_plan(a.cols).threads) {
    case 32:
      layer_norm_rows<T, 32>
          <<<sh::grid_of(sh::ceil_div(a.rows, sh::kRowsPerWarpBlock), "layer_norm"),
             32 * sh::kRowsPerWarpBlock, 0, stream>>>(x, y, a);
      break;
    case 256:
      layer_norm_rows<T, 256><<<sh::grid_of(a.rows, "layer_norm"), 256, 0, stream>>>(x, y, a);
      break;
    default:
      layer_norm_rows<T, 512><<<sh::grid_of(a.rows, "layer_norm"), 512, 0, stream>>>(x, y, a);
  }
}

}  // namespace

void layer_norm(DType x_dtype, const void* x, int64_t rows, int64_t cols, DType param_dtype,
                const void* scale, const void* bias, float epsilon, void* y, DType stat_dtype,
                void* mean, void* inv_std, cudaStream_t stream) {
  // Checked up front: the kernel reads these types at run time.
  sh::dispatch_float_types(param_dtype, "layer_norm scale/bias", [](auto) {});
  sh::dispatch_float_types(stat_dtype, "layer_norm statistics", [](auto) {});
  sh::dispatch_float_types(x_dtype, "layer_norm input", [&](auto tag) {
    using T = decltype(tag);
    if (rows <= 0 || cols < 0) return;
    const LayerNormArgs a{rows, cols, scale, bias, param_dtype, epsilon, mean, inv_std, stat_dtype};
    launch(static_cast<const T*>(x), static_cast<T*>(y), a, stream);
    sh::check_launch("layer_norm");
  });
}

}  // namespace ampc::kernels::cuda
