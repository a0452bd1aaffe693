// LayerNormalization forward: a row per
// warp (cols < 1024) or per block of 256 / 512 threads; two reductions in rowwise_tree.h's order
// (sum for the mean, then the squared deviations), then the outputs; the row is read once into
// registers when it fits (CachedRow). Scale, bias and the statistics have run-time element types.
#include "kernels/cuda/layernorm.h"

#include <string>
#include <type_traits>

#include "base/error.h"
#include "kernels/cuda/row_kernel.cuh"
#include "kernels/shared/kernel_args.h"
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

// The row's mean and inverse deviation (every thread of the row gets them): the sum, then the
// squared deviations from the mean, each folded in rowwise_tree.h's order. The forward and the
// backward share it, so the backward's xhat is the forward's.
template <int kThreads, typename Src>
__device__ __forceinline__ void row_stats(const Src& src, int64_t n, float eps, float* smem,
                                          float* mean, float* inv_std) {
  const float s = src.fold(0.0f, [](float acc, float v) { return sh::add(acc, v); });
  const float m = sh::mean_of(sh::block_tree(s, kThreads, smem, sh::SumCombine()), n);
  const float q = src.fold(0.0f, [m](float acc, float v) { return sh::add_sq_dev(acc, v, m); });
  *inv_std = sh::inv_std_of(sh::block_tree(q, kThreads, smem, sh::SumCombine()), n, eps);
  *mean = m;
}

template <int kThreads, typename T, typename Src>
__device__ __forceinline__ void layer_norm_row(const Src& src, int64_t row, T* yr, float* smem,
                                               const LayerNormArgs& a) {
  float m, inv;
  row_stats<kThreads>(src, a.cols, a.eps, smem, &m, &inv);
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

// The backward. Launch 1, per row: the statistics (kept in the workspace for launch 2), the
// sums of g = dy * scale and of g * xhat in the block's order, and dx.
struct LayerNormGradArgs {
  int64_t rows, cols;
  const void* scale;
  DType param_dtype;
  float eps;
  float* stats;  // mean, inv_std per row
};

template <int kThreads, typename T, typename D, typename Src>
__device__ __forceinline__ void layer_norm_grad_row(const Src& src, int64_t row, const D* dyr,
                                                    T* dxr, float* smem,
                                                    const LayerNormGradArgs& a) {
  float m, inv;
  row_stats<kThreads>(src, a.cols, a.eps, smem, &m, &inv);
  if (src.t == 0) {
    a.stats[2 * row] = m;
    a.stats[2 * row + 1] = inv;
  }
  if (!dxr) return;  // uniform across the block: no barrier is skipped by some threads only
  auto g_of = [&](int64_t j) {
    return sh::mul(sh::load_f(dyr, j), sh::load_dyn(a.scale, j, a.param_dtype));
  };
  float sg = 0.0f, sgx = 0.0f;
  src.for_each([&](int64_t j, float v) {
    const float g = g_of(j);
    sg = sh::add(sg, g);
    sgx = sh::add(sgx, sh::mul(g, sh::layer_norm_xhat(v, m, inv)));
  });
  const float mean_g = sh::mean_of(sh::block_tree(sg, kThreads, smem, sh::SumCombine()), a.cols);
  const float mean_gx = sh::mean_of(sh::block_tree(sgx, kThreads, smem, sh::SumCombine()), a.cols);
  src.for_each([&](int64_t j, float v) {
    sh::store_f(
        dxr, j,
        sh::layer_norm_grad_value(g_of(j), sh::layer_norm_xhat(v, m, inv), mean_g, mean_gx, inv));
  });
}

template <typename T, typename D, int kThreads>
__global__ void __launch_bounds__(sh::block_threads(kThreads))
    layer_norm_grad_rows(const T* x, const D* dy, T* dx, LayerNormGradArgs a) {
  with_block_row<kThreads>(x, a.rows, a.cols, [&](const auto& part, int64_t row, float* smem) {
    layer_norm_grad_row<kThreads>(part, row, dy + row * a.cols, dx ? dx + row * a.cols : nullptr,
                                  smem, a);
  });
}

// Launch 2: a thread per column and row chunk folds dy * xhat and dy over the chunk's rows in
// order (consecutive threads read consecutive columns).
template <typename T, typename D>
__global__ void layer_norm_grad_chunk_sums(const T* x, const D* dy, const float* stats,
                                           int64_t rows, int64_t cols, int64_t chunk_rows,
                                           float* partials) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  const int64_t c = blockIdx.y, end = min(rows, (c + 1) * chunk_rows);
  float s = 0.0f, b = 0.0f;
  for (int64_t r = c * chunk_rows; r < end; ++r) {
    const float d = sh::load_f(dy, r * cols + j);
    const float xh =
        sh::layer_norm_xhat(sh::load_f(x, r * cols + j), stats[2 * r], stats[2 * r + 1]);
    s = sh::add(s, sh::mul(d, xh));
    b = sh::add(b, d);
  }
  partials[c * 2 * cols + j] = s;
  partials[c * 2 * cols + cols + j] = b;
}

// Launch 3: per column, the chunks' sums in chunk order.
__global__ void layer_norm_grad_totals(const float* partials, int64_t chunks, int64_t cols,
                                       void* dscale, void* dbias, DType param_dtype) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  float s = 0.0f, b = 0.0f;
  for (int64_t c = 0; c < chunks; ++c) {
    s = sh::add(s, partials[c * 2 * cols + j]);
    b = sh::add(b, partials[c * 2 * cols + cols + j]);
  }
  if (dscale) sh::store_dyn(dscale, j, param_dtype, s);
  if (dbias) sh::store_dyn(dbias, j, param_dtype, b);
}

constexpr int kColumnThreads = 256;

template <typename T, typename D>
void launch_grad(const T* x, const D* dy, T* dx, const LayerNormGradArgs& a, void* dscale,
                 void* dbias, float* partials, cudaStream_t stream) {
  if (a.rows > 0) {
    switch (sh::row_plan(a.cols).threads) {
      case 32:
        layer_norm_grad_rows<T, D, 32>
            <<<sh::grid_of(sh::ceil_div(a.rows, sh::kRowsPerWarpBlock), "layer_norm_grad"),
               32 * sh::kRowsPerWarpBlock, 0, stream>>>(x, dy, dx, a);
        break;
      case 256:
        layer_norm_grad_rows<T, D, 256>
            <<<sh::grid_of(a.rows, "layer_norm_grad"), 256, 0, stream>>>(x, dy, dx, a);
        break;
      default:
        layer_norm_grad_rows<T, D, 512>
            <<<sh::grid_of(a.rows, "layer_norm_grad"), 512, 0, stream>>>(x, dy, dx, a);
    }
  }
  if (!dscale && !dbias) return;
  const unsigned column_blocks =
      sh::grid_of(sh::ceil_div(a.cols, kColumnThreads), "layer_norm_grad");
  const int64_t chunks = sh::layer_norm_grad_chunks(a.rows);
  if (chunks > 0) {
    layer_norm_grad_chunk_sums<T, D>
        <<<dim3(column_blocks, static_cast<unsigned>(chunks)), kColumnThreads, 0, stream>>>(
            x, dy, a.stats, a.rows, a.cols, sh::layer_norm_grad_chunk_rows(a.rows), partials);
  }
  layer_norm_grad_totals<<<column_blocks, kColumnThreads, 0, stream>>>(
      partials, chunks, a.cols, dscale, dbias, a.param_dtype);
}

}  // namespace

void layer_norm_grad(DType x_dtype, DType dy_dtype, const void* x, const void* dy, int64_t rows,
                     int64_t cols, DType param_dtype, const void* scale, float epsilon, void* dx,
                     void* dscale, void* dbias, void* workspace, cudaStream_t stream) {
  sh::dispatch_float_types(param_dtype, "layer_norm_grad scale", [](auto) {});
  if (!sh::grad_input_fits(dy_dtype, x_dtype)) {
    throw Error("layer_norm_grad: dY of type " + std::string(dtype_name(dy_dtype)) +
                " does not fit X of type " + std::string(dtype_name(x_dtype)));
  }
  sh::dispatch_float_types(x_dtype, "layer_norm_grad input", [&](auto tag) {
    sh::dispatch_float_types(dy_dtype, "layer_norm_grad dY", [&](auto dtag) {
      using T = decltype(tag);
      using D = decltype(dtag);
      // dY of x's type, or 16-bit with f32 x (the pairs grad_input_fits lets through).
      if constexpr (std::is_same_v<T, D> || std::is_same_v<T, float>) {
        if (rows < 0 || cols <= 0) return;  // no rows: dscale and dbias are zeros
        const sh::LayerNormGradLayout l = sh::layer_norm_grad_layout(rows, cols, 4);
        char* ws = static_cast<char*>(workspace);
        const LayerNormGradArgs a{rows,        cols,    scale,
                                  param_dtype, epsilon, reinterpret_cast<float*>(ws)};
        launch_grad(static_cast<const T*>(x), static_cast<const D*>(dy), static_cast<T*>(dx), a,
                    dscale, dbias, reinterpret_cast<float*>(ws + l.partials_offset), stream);
        sh::check_launch("layer_norm_grad");
      }
    });
  });
}

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
