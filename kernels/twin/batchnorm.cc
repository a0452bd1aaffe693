// CPU twin of kernels/cuda/batchnorm.cu: batchnorm_math.h's functions in the kernels' order
// (per channel and chunk: the block's thread sums and tree, then the chunks in order).
#include "kernels/twin/batchnorm.h"

#include <string>
#include <vector>

#include "kernels/shared/batchnorm_layout.h"
#include "kernels/shared/batchnorm_math.h"
#include "kernels/shared/rowwise_tree.h"

namespace ampc::kernels::twin {

namespace bn = ampc::kernels::shared::bn;

namespace {

// A chunk's total as the block computes it: thread values, then the tree (data_launch.cuh's
// block_tree_sum, which halves as a warp's tree does).
template <typename M>
M tree(std::vector<M>& v) {
  shared::warp_tree_host(v.data(), bn::kThreads, [](M a, M b) { return shared::add(a, b); });
  return v[0];
}

}  // namespace

void batch_norm_inference(DType x_dtype, DType param_dtype, DType stat_dtype, const void* x,
                          int64_t n, int64_t c, int64_t spatial, const void* scale,
                          const void* bias, const void* mean, const void* var, float epsilon,
                          void* y) {
  bn::visit_batch_norm(x_dtype, param_dtype, stat_dtype, [&](auto xt, auto pt, auto st) {
    using T = typename decltype(xt)::type;
    using P = typename decltype(pt)::type;
    using S = typename decltype(st)::type;
    using M = bn::MathOf<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    const int64_t total = n * c * spatial;
    for (int64_t k = 0; k < total; ++k) {
      const int64_t ch = (k / spatial) % c;
      M a, b;
      bn::fold_channel(ch, static_cast<const P*>(scale), static_cast<const P*>(bias),
                       static_cast<const S*>(mean), static_cast<const S*>(var),
                       static_cast<M>(epsilon), &a, &b);
      bn::b_store(ys, k, bn::affine(a, b, bn::b_load<M>(xs, k)));
    }
  });
}

void batch_norm_training(DType x_dtype, DType param_dtype, DType stat_dtype, const void* x,
                         int64_t n, int64_t c, int64_t spatial, const void* scale, const void* bias,
                         const void* mean, const void* var, float epsilon, float momentum, void* y,
                         void* running_mean_out, void* running_var_out, void* saved_mean,
                         void* saved_var, void* workspace) {
  bn::visit_batch_norm(x_dtype, param_dtype, stat_dtype, [&](auto xt, auto pt, auto st) {
    using T = typename decltype(xt)::type;
    using P = typename decltype(pt)::type;
    using S = typename decltype(st)::type;
    using M = bn::MathOf<T>;
    const bn::Workspace w = bn::workspace_layout(n, c, spatial);
    const auto [part_sum, part_sq, a, b] = bn::workspace_arrays<M>(workspace, w);
    const T* xs = static_cast<const T*>(x);
    const int64_t count = n * spatial, splits = w.splits;
    std::vector<M> v(bn::kThreads);
    // Pass 1: the chunks' sums.
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t s = 0; s < splits; ++s) {
        int64_t begin, end;
        bn::chunk_range(count, splits, s, &begin, &end);
        for (int t = 0; t < bn::kThreads; ++t)
          v[t] = bn::thread_sum<M>(xs, ch, c, spatial, begin, end, t);
        part_sum[ch * splits + s] = tree(v);
      }
    }
    // Pass 2: the chunks' squared deviations from the channel mean.
    for (int64_t ch = 0; ch < c; ++ch) {
      const M m = bn::combine_mean(part_sum + ch * splits, splits, count);
      for (int64_t s = 0; s < splits; ++s) {
        int64_t begin, end;
        bn::chunk_range(count, splits, s, &begin, &end);
        for (int t = 0; t < bn::kThreads; ++t)
          v[t] = bn::thread_sq_dev<M>(xs, ch, c, spatial, begin, end, t, m);
        part_sq[ch * splits + s] = tree(v);
      }
    }
    // Per channel: statistics, folded affine map, running statistics; then y.
    for (int64_t ch = 0; ch < c; ++ch) {
      bn::finish_channel<M>(ch, splits, count, part_sum, part_sq, static_cast<const P*>(scale),
                            static_cast<const P*>(bias), static_cast<const S*>(mean),
                            static_cast<const S*>(var), static_cast<M>(epsilon),
                            static_cast<M>(momentum), static_cast<S*>(running_mean_out),
                            static_cast<S*>(running_var_out), static_cast<S*>(saved_mean),
                            static_cast<S*>(saved_var), a + ch, b + ch);
    }
    T* ys = static_cast<T*>(y);
    const int64_t total = n * c * spatial;
    for (int64_t k = 0; k < total; ++k) {
      const int64_t ch = (k / spatial) % c;
      bn::b_store(ys, k, bn::affine(a[ch], b[ch], bn::b_load<M>(xs, k)));
    }
  });
}

}  // namespace ampc::kernels::twin
