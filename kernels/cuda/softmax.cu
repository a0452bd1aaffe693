// Softmax / LogSoftmax kernels. inner == 1: a row per warp (n < 1024) or per block of 256 / 512
// threads; three passes over the row (max, sum of exp, outputs) from registers when the row
// fits (CachedRow), else from global memory; the reductions in rowwise_tree.h's order. inner > 1: a
// thread per column walks its n rows in order (loads coalesced across the columns).
#include "kernels/cuda/softmax.h"

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

// One row from `src` (StreamedRow or CachedRow: the same values in the same order).
template <int kThreads, typename T, typename Src>
__device__ __forceinline__ void softmax_row(const Src& src, T* yr, float* smem, bool log_softmax) {
  float m = src.fold(sh::kNegInf, [](float a, float v) { return sh::MaxCombine()(a, v); });
  m = sh::block_tree(m, kThreads, smem, sh::MaxCombine());
  float s = src.fold(0.0f, [m](float a, float v) { return sh::add(a, sh::exp_shifted(v, m)); });
  s = sh::block_tree(s, kThreads, smem, sh::SumCombine());
  if (log_softmax) {
    const float log_s = sh::log_f(s);
    src.for_each(
        [&](int64_t j, float v) { sh::store_f(yr, j, sh::log_softmax_value(v, m, log_s)); });
  } else {
    const float inv = sh::softmax_inv_sum(s);
    src.for_each([&](int64_t j, float v) { sh::store_f(yr, j, sh::softmax_value(v, m, inv)); });
  }
}

template <typename T, int kThreads>
__global__ void __launch_bounds__(sh::block_threads(kThreads))
    softmax_rows(const T* x, T* y, int64_t outer, int64_t n, bool log_softmax) {
  with_block_row<kThreads>(x, outer, n, [&](const auto& part, int64_t row, float* smem) {
    softmax_row<kThreads>(part, y + row * n, smem, log_softmax);
  });
}

template <typename T>
__global__ void softmax_columns(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                                bool log_softmax) {
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= outer * inner) return;
  const int64_t o = id / inner, i = id % inner;
  const T* xc = x + o * n * inner + i;
  T* yc = y + o * n * inner + i;
  float m = sh::kNegInf, s = 0.0f;
  for (int64_t r = 0; r < n; ++r) m = sh::MaxCombine()(m, sh::load_f(xc, r * inner));
  for (int64_t r = 0; r < n; ++r) s = sh::add(s, sh::exp_shifted(sh::load_f(xc, r * inner), m));
  const float f = log_softmax ? sh::log_f(s) : sh::softmax_inv_sum(s);
  for (int64_t r = 0; r < n; ++r) {
    const float v = sh::load_f(xc, r * inner);
    sh::store_f(yc, r * inner,
                log_softmax ? sh::log_softmax_value(v, m, f) : sh::softmax_value(v, m, f));
  }
}

template <typename T>
void launch(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool log_softmax,
            cudaStream_t stream) {
  if (inner > 1) {
    const unsigned blocks = sh::grid_of(sh::ceil_div(outer * inner, 256), "softmax");
    softmax_columns<T><<<blocks, 256, 0, stream>>>(x, y, outer, n, inner, log_softmax);
    return;
  }
  switch (sh::row_plan(n).threads) {
    case 32:
      softmax_rows<T, 32><<<sh::grid_of(sh::ceil_div(outer, sh::kRowsPerWarpBlock), "softmax"),
                            32 * sh::kRowsPerWarpBlock, 0, stream>>>(x, y, outer, n, log_softmax);
      break;
    case 256:
      softmax_rows<T, 256>
          <<<sh::grid_of(outer, "softmax"), 256, 0, stream>>>(x, y, outer, n, log_softmax);
      break;
    default:
      softmax_rows<T, 512>
          <<<sh::grid_of(outer, "softmax"), 512, 0, stream>>>(x, y, outer, n, log_softmax);
  }
}

// The backward of one row of y (src) given dy: the row's sum in the block's order (each
// thread's terms in for_each's order, then the tree), then dx.
template <int kThreads, typename T, typename D, typename Src>
__device__ __forceinline__ void softmax_grad_row(const Src& src, const D* dyr, T* dxr, float* smem,
                                                 bool log_softmax) {
  float s = 0.0f;
  src.for_each([&](int64_t j, float y) {
    const float dy = sh::load_f(dyr, j);
    s = sh::add(s, log_softmax ? dy : sh::softmax_grad_term(dy, y));
  });
  s = sh::block_tree(s, kThreads, smem, sh::SumCombine());
  src.for_each([&](int64_t j, float y) {
    const float dy = sh::load_f(dyr, j);
    sh::store_f(dxr, j,
                log_softmax ? sh::log_softmax_grad_value(dy, fmath::exp_f32(y), s)
                            : sh::softmax_grad_value(dy, y, s));
  });
}

template <typename T, typename D, int kThreads>
__global__ void __launch_bounds__(sh::block_threads(kThreads))
    softmax_grad_rows(const T* y, const D* dy, T* dx, int64_t outer, int64_t n, bool log_softmax) {
  with_block_row<kThreads>(y, outer, n, [&](const auto& part, int64_t row, float* smem) {
    softmax_grad_row<kThreads>(part, dy + row * n, dx + row * n, smem, log_softmax);
  });
}

template <typename T, typename D>
__global__ void softmax_grad_columns(const T* y, const D* dy, T* dx, int64_t outer, int64_t n,
                                     int64_t inner, bool log_softmax) {
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= outer * inner) return;
  const int64_t base = id / inner * n * inner + id % inner;
  float s = 0.0f;
  for (int64_t r = 0; r < n; ++r) {
    const float d = sh::load_f(dy, base + r * inner);
    s = sh::add(s, log_softmax ? d : sh::softmax_grad_term(d, sh::load_f(y, base + r * inner)));
  }
  for (int64_t r = 0; r < n; ++r) {
    const float d = sh::load_f(dy, base + r * inner), v = sh::load_f(y, base + r * inner);
    sh::store_f(dx, base + r * inner,
                log_softmax ? sh::log_softmax_grad_value(d, fmath::exp_f32(v), s)
                            : sh::softmax_grad_value(d, v, s));
  }
}

template <typename T, typename D>
void launch_grad(const T* y, const D* dy, T* dx, int64_t outer, int64_t n, int64_t inner,
                 bool log_softmax, cudaStream_t stream) {
  if (inner > 1) {
    const unsigned blocks = sh::grid_of(sh::ceil_div(outer * inner, 256), "softmax_grad");
    softmax_grad_columns<T, D><<<blocks, 256, 0, stream>>>(y, dy, dx, outer, n, inner, log_softmax);
    return;
  }
  switch (sh::row_plan(n).threads) {
    case 32:
      softmax_grad_rows<T, D, 32>
          <<<sh::grid_of(sh::ceil_div(outer, sh::kRowsPerWarpBlock), "softmax_grad"),
             32 * sh::kRowsPerWarpBlock, 0, stream>>>(y, dy, dx, outer, n, log_softmax);
      break;
    case 256:
      softmax_grad_rows<T, D, 256><<<sh::grid_of(outer, "softmax_grad"), 256, 0, stream>>>(
          y, dy, dx, outer, n, log_softmax);
      break;
    default:
      softmax_grad_rows<T, D, 512><<<sh::grid_of(outer, "softmax_grad"), 512, 0, stream>>>(
          y, dy, dx, outer, n, log_softmax);
  }
}

}  // namespace

void softmax_grad(DType dtype, DType dy_dtype, const void* y, const void* dy, void* dx,
                  int64_t outer, int64_t n, int64_t inner, bool log_softmax, cudaStream_t stream) {
  if (!sh::grad_input_fits(dy_dtype, dtype)) {
    throw Error("softmax_grad: dY of type " + std::string(dtype_name(dy_dtype)) +
                " does not fit Y of type " + std::string(dtype_name(dtype)));
  }
  sh::dispatch_float_types(dtype, "softmax_grad", [&](auto tag) {
    sh::dispatch_float_types(dy_dtype, "softmax_grad dY", [&](auto dtag) {
      using T = decltype(tag);
      using D = decltype(dtag);
      // dY of y's type, or 16-bit with f32 y (the pairs grad_input_fits lets through).
      if constexpr (std::is_same_v<T, D> || std::is_same_v<T, float>) {
        if (outer <= 0 || n <= 0 || inner <= 0) return;
        launch_grad(static_cast<const T*>(y), static_cast<const D*>(dy), static_cast<T*>(dx), outer,
                    n, inner, log_softmax, stream);
        sh::check_launch("softmax_grad");
      }
    });
  });
}

void softmax(DType dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
             bool log_softmax, cudaStream_t stream) {
  sh::dispatch_float_types(dtype, "softmax", [&](auto tag) {
    using T = decltype(tag);
    if (outer <= 0 || n <= 0 || inner <= 0) return;
    launch(static_cast<const T*>(x), static_cast<T*>(y), outer, n, inner, log_softmax, stream);
    sh::check_launch("softmax");
  });
}

}  // namespace ampc::kernels::cuda
