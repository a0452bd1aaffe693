// BatchNormalization (batchnorm.h). Training: four launches. 1. each block sums one chunk of a
// channel (grid: channels x chunks); 2. each block combines its channel's chunk sums into the
// mean and sums the squared deviations of its chunk; 3. one thread per channel finishes the
// statistics, the folded affine map (workspace) and the running / saved statistics; 4. y = a x
// + b plane by plane (grid-stride). Inference folds per element. The training-mode backward:
// the chunk sums again; each block's squared deviations, dy and dy * (x - mean) sums (three
// trees); one thread per channel for the parameter gradients and dx's coefficients; dx plane by
// plane. The order of every sum is batchnorm_math.h's, which the twin reproduces.
#include <cstdint>

#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/data_launch.cuh"
#include "kernels/shared/batchnorm_layout.h"
#include "kernels/shared/batchnorm_math.h"

namespace ampc::kernels::cuda {

namespace bn = ampc::kernels::shared::bn;
using detail::grid_for;

namespace {

template <typename M, typename T>
__global__ void __launch_bounds__(bn::kThreads)
    chunk_sum_kernel(const T* __restrict__ x, int64_t c, int64_t spatial, int64_t count,
                     int64_t splits, M* __restrict__ part_sum) {
  __shared__ M scratch[bn::kThreads];
  const int64_t ch = blockIdx.x / splits, s = blockIdx.x - ch * splits;
  int64_t begin, end;
  bn::chunk_range(count, splits, s, &begin, &end);
  const M v = bn::thread_sum<M>(x, ch, c, spatial, begin, end, static_cast<int>(threadIdx.x));
  const M total =
      detail::block_tree_sum<bn::kThreads>(v, scratch, [](M a, M b) { return shared::add(a, b); });
  if (threadIdx.x == 0) part_sum[blockIdx.x] = total;
}

template <typename M, typename T>
__global__ void __launch_bounds__(bn::kThreads)
    chunk_sq_kernel(const T* __restrict__ x, int64_t c, int64_t spatial, int64_t count,
                    int64_t splits, const M* __restrict__ part_sum, M* __restrict__ part_sq) {
  __shared__ M scratch[bn::kThreads];
  const int64_t ch = blockIdx.x / splits, s = blockIdx.x - ch * splits;
  int64_t begin, end;
  bn::chunk_range(count, splits, s, &begin, &end);
  const M m = bn::combine_mean(part_sum + ch * splits, splits, count);
  const M v = bn::thread_sq_dev<M>(x, ch, c, spatial, begin, end, static_cast<int>(threadIdx.x), m);
  const M total =
      detail::block_tree_sum<bn::kThreads>(v, scratch, [](M a, M b) { return shared::add(a, b); });
  if (threadIdx.x == 0) part_sq[blockIdx.x] = total;
}

template <typename M, typename P, typename S>
__global__ void finish_kernel(int64_t c, int64_t splits, int64_t count,
                              const M* __restrict__ part_sum, const M* __restrict__ part_sq,
                              const P* __restrict__ scale, const P* __restrict__ bias,
                              const S* __restrict__ mean, const S* __restrict__ var, M eps,
                              M momentum, S* running_mean, S* running_var, S* saved_mean,
                              S* saved_var, M* __restrict__ a, M* __restrict__ b) {
  AMPC_GRID_STRIDE(int64_t, ch, c) {
    bn::finish_channel<M>(ch, splits, count, part_sum, part_sq, scale, bias, mean, var, eps,
                          momentum, running_mean, running_var, saved_mean, saved_var, a + ch,
                          b + ch);
  }
}

// y over planes (n * c of them, grid-stride along y) and their elements (along x): the
// channel is found once per plane, not per element.
template <typename M, typename T>
__global__ void affine_kernel(const T* __restrict__ x, int64_t c, int64_t spatial, int64_t planes,
                              const M* __restrict__ a, const M* __restrict__ b, T* __restrict__ y) {
  for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
    const int64_t ch = pl % c;
    const M av = a[ch], bv = b[ch];
    const T* xp = x + pl * spatial;
    T* yp = y + pl * spatial;
    AMPC_GRID_STRIDE(int64_t, j, spatial)
    bn::b_store(yp, j, bn::affine(av, bv, bn::b_load<M>(xp, j)));
  }
}

template <typename M, typename T, typename P, typename S>
__global__ void inference_kernel(const T* __restrict__ x, int64_t c, int64_t spatial,
                                 int64_t planes, const P* __restrict__ scale,
                                 const P* __restrict__ bias, const S* __restrict__ mean,
                                 const S* __restrict__ var, M eps, T* __restrict__ y) {
  for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
    const int64_t ch = pl % c;
    M a, b;
    bn::fold_channel(ch, scale, bias, mean, var, eps, &a, &b);
    const T* xp = x + pl * spatial;
    T* yp = y + pl * spatial;
    AMPC_GRID_STRIDE(int64_t, j, spatial)
    bn::b_store(yp, j, bn::affine(a, b, bn::b_load<M>(xp, j)));
  }
}

// Backward: each block sums one chunk's squared deviations, dy and dy * (x - mean) (three
// block trees).
template <typename M, typename T>
__global__ void __launch_bounds__(bn::kThreads)
    chunk_grad_kernel(const T* __restrict__ x, const T* __restrict__ dy, int64_t c, int64_t spatial,
                      int64_t count, int64_t splits, const M* __restrict__ part_sum,
                      M* __restrict__ part_sq, M* __restrict__ part_dy, M* __restrict__ part_dyx) {
  __shared__ M scratch[bn::kThreads];
  const int64_t ch = blockIdx.x / splits, s = blockIdx.x - ch * splits;
  int64_t begin, end;
  bn::chunk_range(count, splits, s, &begin, &end);
  const M m = bn::combine_mean(part_sum + ch * splits, splits, count);
  M q, a, b;
  bn::thread_grad_sums<M>(x, dy, ch, c, spatial, begin, end, static_cast<int>(threadIdx.x), m, &q,
                          &a, &b);
  auto plus = [](M u, M v) { return shared::add(u, v); };
  const M total_sq = detail::block_tree_sum<bn::kThreads>(q, scratch, plus);
  __syncthreads();  // scratch is used again
  const M total_dy = detail::block_tree_sum<bn::kThreads>(a, scratch, plus);
  __syncthreads();
  const M total_dyx = detail::block_tree_sum<bn::kThreads>(b, scratch, plus);
  if (threadIdx.x == 0) {
    part_sq[blockIdx.x] = total_sq;
    part_dy[blockIdx.x] = total_dy;
    part_dyx[blockIdx.x] = total_dyx;
  }
}

template <typename M, typename P>
__global__ void finish_grad_kernel(int64_t c, int64_t splits, int64_t count,
                                   const M* __restrict__ part_sum, const M* __restrict__ part_sq,
                                   const M* __restrict__ part_dy, const M* __restrict__ part_dyx,
                                   const P* __restrict__ scale, M eps, P* dscale, P* dbias,
                                   bn::GradCoefficients<M>* __restrict__ coefficients) {
  AMPC_GRID_STRIDE(int64_t, ch, c) {
    bn::finish_grad_channel<M>(ch, splits, count, part_sum, part_sq, part_dy, part_dyx, scale, eps,
                               dscale, dbias, coefficients + ch);
  }
}

// dx over planes (grid-stride along y) and their elements (along x).
template <typename M, typename T>
__global__ void grad_dx_kernel(const T* __restrict__ x, const T* __restrict__ dy, int64_t c,
                               int64_t spatial, int64_t planes,
                               const bn::GradCoefficients<M>* __restrict__ coefficients,
                               T* __restrict__ dx) {
  for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
    const bn::GradCoefficients<M> g = coefficients[pl % c];
    const T* xp = x + pl * spatial;
    const T* dyp = dy + pl * spatial;
    T* dxp = dx + pl * spatial;
    AMPC_GRID_STRIDE(int64_t, j, spatial)
    bn::b_store(dxp, j, bn::grad_dx(g, bn::b_load<M>(xp, j), bn::b_load<M>(dyp, j)));
  }
}

// Grid of the per-plane kernels: x covers a plane's elements, y the planes (both capped).
dim3 plane_grid(int64_t planes, int64_t spatial) {
  const int64_t per_plane = (spatial + detail::kThreads - 1) / detail::kThreads;
  const int64_t x = per_plane < 1 ? 1 : (per_plane > 64 ? 64 : per_plane);
  const int64_t y = planes > 65535 ? 65535 : planes;
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y < 1 ? 1 : y));
}

}  // namespace

void batch_norm_inference(DType x_dtype, DType param_dtype, DType stat_dtype, const void* x,
                          int64_t n, int64_t c, int64_t spatial, const void* scale,
                          const void* bias, const void* mean, const void* var, float epsilon,
                          void* y, cudaStream_t stream) {
  bn::visit_batch_norm(x_dtype, param_dtype, stat_dtype, [&](auto xt, auto pt, auto st) {
    using T = typename decltype(xt)::type;
    using P = typename decltype(pt)::type;
    using S = typename decltype(st)::type;
    using M = bn::MathOf<T>;
    const int64_t total = n * c * spatial;
    if (total <= 0) return;
    inference_kernel<M, T, P, S><<<plane_grid(n * c, spatial), detail::kThreads, 0, stream>>>(
        static_cast<const T*>(x), c, spatial, n * c, static_cast<const P*>(scale),
        static_cast<const P*>(bias), static_cast<const S*>(mean), static_cast<const S*>(var),
        static_cast<M>(epsilon), static_cast<T*>(y));
    detail::check_launch("batch_norm_inference");
  });
}

void batch_norm_training(DType x_dtype, DType param_dtype, DType stat_dtype, const void* x,
                         int64_t n, int64_t c, int64_t spatial, const void* scale, const void* bias,
                         const void* mean, const void* var, float epsilon, float momentum, void* y,
                         void* running_mean_out, void* running_var_out, void* saved_mean,
                         void* saved_var, void* workspace, cudaStream_t stream) {
  bn::visit_batch_norm(x_dtype, param_dtype, stat_dtype, [&](auto xt, auto pt, auto st) {
    using T = typename decltype(xt)::type;
    using P = typename decltype(pt)::type;
    using S = typename decltype(st)::type;
    using M = bn::MathOf<T>;
    if (c <= 0) return;
    const bn::Workspace w = bn::workspace_layout(n, c, spatial);
    const int64_t count = n * spatial, splits = w.splits, blocks = c * splits;
    if (blocks >= (int64_t(1) << 31)) throw Error("batch_norm_training: too many channels");
    const auto [part_sum, part_sq, a, b] = bn::workspace_arrays<M>(workspace, w);
    const T* xs = static_cast<const T*>(x);
    chunk_sum_kernel<M, T><<<static_cast<unsigned>(blocks), bn::kThreads, 0, stream>>>(
        xs, c, spatial, count, splits, part_sum);
    detail::check_launch("batch_norm_training (sums)");
    chunk_sq_kernel<M, T><<<static_cast<unsigned>(blocks), bn::kThreads, 0, stream>>>(
        xs, c, spatial, count, splits, part_sum, part_sq);
    detail::check_launch("batch_norm_training (squared deviations)");
    finish_kernel<M, P, S><<<grid_for(c, 128), 128, 0, stream>>>(
        c, splits, count, part_sum, part_sq, static_cast<const P*>(scale),
        static_cast<const P*>(bias), static_cast<const S*>(mean), static_cast<const S*>(var),
        static_cast<M>(epsilon), static_cast<M>(momentum), static_cast<S*>(running_mean_out),
        static_cast<S*>(running_var_out), static_cast<S*>(saved_mean), static_cast<S*>(saved_var),
        a, b);
    detail::check_launch("batch_norm_training (statistics)");
    const int64_t total = n * c * spatial;
    if (total <= 0) return;
    affine_kernel<M, T><<<plane_grid(n * c, spatial), detail::kThreads, 0, stream>>>(
        xs, c, spatial, n * c, a, b, static_cast<T*>(y));
    detail::check_launch("batch_norm_training (normalise)");
  });
}

void batch_norm_grad(DType x_dtype, DType param_dtype, const void* x, const void* dy, int64_t n,
                     int64_t c, int64_t spatial, const void* scale, float epsilon, void* dx,
                     void* dscale, void* dbias, void* workspace, cudaStream_t stream) {
  bn::visit_batch_norm(x_dtype, param_dtype, param_dtype, [&](auto xt, auto pt, auto) {
    using T = typename decltype(xt)::type;
    using P = typename decltype(pt)::type;
    using M = bn::MathOf<T>;
    if (c <= 0) return;
    const bn::GradWorkspace w = bn::grad_workspace_layout(n, c, spatial);
    const int64_t count = n * spatial, splits = w.stats.splits, blocks = c * splits;
    if (blocks >= (int64_t(1) << 31)) throw Error("batch_norm_grad: too many channels");
    const auto arrays = bn::grad_workspace_arrays<M>(workspace, w);
    const T* xs = static_cast<const T*>(x);
    const T* dys = static_cast<const T*>(dy);
    chunk_sum_kernel<M, T><<<static_cast<unsigned>(blocks), bn::kThreads, 0, stream>>>(
        xs, c, spatial, count, splits, arrays.part_sum);
    detail::check_launch("batch_norm_grad (sums)");
    chunk_grad_kernel<M, T><<<static_cast<unsigned>(blocks), bn::kThreads, 0, stream>>>(
        xs, dys, c, spatial, count, splits, arrays.part_sum, arrays.part_sq, arrays.part_dy,
        arrays.part_dyx);
    detail::check_launch("batch_norm_grad (squared deviations, gradient sums)");
    finish_grad_kernel<M, P><<<grid_for(c, 128), 128, 0, stream>>>(
        c, splits, count, arrays.part_sum, arrays.part_sq, arrays.part_dy, arrays.part_dyx,
        static_cast<const P*>(scale), static_cast<M>(epsilon), static_cast<P*>(dscale),
        static_cast<P*>(dbias), arrays.coefficients);
    detail::check_launch("batch_norm_grad (parameter gradients)");
    if (!dx || n * c * spatial <= 0) return;
    grad_dx_kernel<M, T><<<plane_grid(n * c, spatial), detail::kThreads, 0, stream>>>(
        xs, dys, c, spatial, n * c, arrays.coefficients, static_cast<T*>(dx));
    detail::check_launch("batch_norm_grad (dx)");
  });
}

}  // namespace ampc::kernels::cuda
