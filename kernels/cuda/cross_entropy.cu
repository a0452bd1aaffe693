// SoftmaxCrossEntropyLoss forward. Per position (i, j) the log-softmax over the c classes:
// d == 1, a row per warp (c < 1024) or per block of 256 / 512 threads, reductions in
// rowwise_tree.h's order; d > 1, a thread per position walks the classes in order (coalesced
// across j). Each position's loss goes to the output (reduction none) or, with its weight, to
// the workspace; then one block sums both in the row order (sum, mean).
#include "kernels/cuda/cross_entropy.h"

#include <type_traits>

#include "base/error.h"
#include "kernels/cuda/row_kernel.cuh"
#include "kernels/shared/rowwise.h"
#include "kernels/shared/rowwise_device.h"
#include "kernels/shared/rowwise_dispatch.h"

namespace ampc::kernels::cuda {
namespace {

namespace sh = kernels::shared;

struct CeArgs {
  int64_t n, c, d;
  const void* labels;
  bool labels64;
  const void* weight;
  DType weight_dtype;
  bool has_ignore;
  int64_t ignore_index;
  bool reduce;  // false: loss per position into `loss`; true: into ws_loss / ws_weight
  void* loss;   // element type O (the log-probabilities')
  float* ws_loss;
  float* ws_weight;
  int32_t* bad_label;  // set to 1 when a label is out of range (may be null)
};

// The position's loss from its log-softmax statistics (one thread).
template <typename T, typename O>
__device__ void finish_position(const CeArgs& a, int64_t pos, const T* scores, float m,
                                float log_s) {
  const int64_t label = a.labels64 ? static_cast<const int64_t*>(a.labels)[pos]
                                   : static_cast<const int32_t*>(a.labels)[pos];
  float loss = 0.0f, w = 0.0f;
  switch (sh::label_status(label, a.c, a.has_ignore, a.ignore_index)) {
    case 0:
      w = a.weight ? sh::load_dyn(a.weight, label, a.weight_dtype) : 1.0f;
      loss = sh::nll_value(sh::log_softmax_value(sh::load_f(scores, label * a.d), m, log_s), w);
      break;
    case 1:
      break;
    default:
      loss = sh::quiet_nan();
      if (a.bad_label) *a.bad_label = 1;
  }
  if (a.reduce) {
    a.ws_loss[pos] = loss;
    a.ws_weight[pos] = w;
  } else {
    sh::store_f(static_cast<O*>(a.loss), pos, loss);
  }
}

template <int kThreads, typename T, typename O, typename Src>
__device__ __forceinline__ void ce_row(const Src& src, int64_t row, const T* xr, O* log_prob,
                                       float* smem, const CeArgs& a) {
  float m = src.fold(sh::kNegInf, [](float acc, float v) { return sh::MaxCombine()(acc, v); });
  m = sh::block_tree(m, kThreads, smem, sh::MaxCombine());
  const float s =
      src.fold(0.0f, [m](float acc, float v) { return sh::add(acc, sh::exp_shifted(v, m)); });
  const float log_s = sh::log_f(sh::block_tree(s, kThreads, smem, sh::SumCombine()));
  if (log_prob) {
    O* out = log_prob + row * a.c;
    src.for_each(
        [&](int64_t k, float v) { sh::store_f(out, k, sh::log_softmax_value(v, m, log_s)); });
  }
  if (src.t == 0) finish_position<T, O>(a, row, xr, m, log_s);
}

template <typename T, typename O, int kThreads>
__global__ void __launch_bounds__(sh::block_threads(kThreads))
    ce_rows(const T* x, O* log_prob, CeArgs a) {
  with_block_row<kThreads>(x, a.n, a.c, [&](const auto& part, int64_t row, float* smem) {
    ce_row<kThreads>(part, row, x + row * a.c, log_prob, smem, a);
  });
}

template <typename T, typename O>
__global__ void ce_columns(const T* x, O* log_prob, CeArgs a) {
  const int64_t pos = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (pos >= a.n * a.d) return;
  const int64_t i = pos / a.d, j = pos % a.d;
  const T* xc = x + i * a.c * a.d + j;
  float m = sh::kNegInf, s = 0.0f;
  for (int64_t k = 0; k < a.c; ++k) m = sh::MaxCombine()(m, sh::load_f(xc, k * a.d));
  for (int64_t k = 0; k < a.c; ++k) s = sh::add(s, sh::exp_shifted(sh::load_f(xc, k * a.d), m));
  const float log_s = sh::log_f(s);
  if (log_prob) {
    O* out = log_prob + i * a.c * a.d + j;
    for (int64_t k = 0; k < a.c; ++k)
      sh::store_f(out, k * a.d, sh::log_softmax_value(sh::load_f(xc, k * a.d), m, log_s));
  }
  finish_position<T, O>(a, pos, xc, m, log_s);
}

// One block (or warp) sums the positions' losses (and weights for the mean).
template <typename O, int kThreads>
__global__ void __launch_bounds__(sh::block_threads(kThreads)) ce_reduce(CeArgs a, bool mean) {
  __shared__ float smem[sh::kWarpSize];
  const int64_t positions = a.n * a.d;
  const sh::RowPlan plan{kThreads, sh::row_plan(positions).vec};
  const int t = threadIdx.x;
  auto sum = [](float acc, float v) { return sh::add(acc, v); };
  const float total = sh::block_tree(sh::thread_partial(a.ws_loss, positions, plan, t, 0.0f, sum),
                                     kThreads, smem, sh::SumCombine());
  float out = total;
  if (mean) {
    const float w = sh::block_tree(sh::thread_partial(a.ws_weight, positions, plan, t, 0.0f, sum),
                                   kThreads, smem, sh::SumCombine());
    out = sh::div(total, w);
  }
  if (t == 0) sh::store_f(static_cast<O*>(a.loss), 0, out);
}

template <typename T, typename O>
void launch(const T* x, O* log_prob, const CeArgs& a, CeReduction reduction, cudaStream_t stream) {
  const char* what = "softmax_cross_entropy";
  if (a.n * a.d > 0) {
    if (a.d > 1) {
      ce_columns<T, O>
          <<<sh::grid_of(sh::ceil_div(a.n * a.d, 256), what), 256, 0, stream>>>(x, log_prob, a);
    } else if (sh::row_plan(a.c).threads == 32) {
      ce_rows<T, O, 32><<<sh::grid_of(sh::ceil_div(a.n, sh::kRowsPerWarpBlock), what),
                          32 * sh::kRowsPerWarpBlock, 0, stream>>>(x, log_prob, a);
    } else if (sh::row_plan(a.c).threads == 256) {
      ce_rows<T, O, 256><<<sh::grid_of(a.n, what), 256, 0, stream>>>(x, log_prob, a);
    } else {
      ce_rows<T, O, 512><<<sh::grid_of(a.n, what), 512, 0, stream>>>(x, log_prob, a);
    }
    sh::check_launch(what);
  }
  if (!a.reduce) return;
  const bool mean = reduction == CeReduction::kMean;
  switch (sh::row_plan(a.n * a.d).threads) {
    case 32:
      ce_reduce<O, 32><<<1, 32, 0, stream>>>(a, mean);
      break;
    case 256:
      ce_reduce<O, 256><<<1, 256, 0, stream>>>(a, mean);
      break;
    default:
      ce_reduce<O, 512><<<1, 512, 0, stream>>>(a, mean);
  }
  sh::check_launch(what);
}

}  // namespace

void softmax_cross_entropy(DType dtype, const void* scores, DType label_dtype, const void* labels,
                           int64_t n, int64_t c, int64_t d, DType weight_dtype, const void* weight,
                           bool has_ignore_index, int64_t ignore_index, CeReduction reduction,
                           void* loss, void* log_prob, void* workspace, cudaStream_t stream,
                           int32_t* bad_label, DType out_dtype) {
  if (sh::ce_output_type(dtype, out_dtype) == DType::kUndefined)
    throw Error("softmax_cross_entropy: only 16-bit scores widen, to f32 outputs");
  const bool widened = sh::ce_output_type(dtype, out_dtype) != dtype;
  if (weight) sh::dispatch_float_types(weight_dtype, "softmax_cross_entropy weight", [](auto) {});
  sh::dispatch_label_types(label_dtype, "softmax_cross_entropy labels", [](auto) {});
  sh::dispatch_float_types(dtype, "softmax_cross_entropy scores", [&](auto tag) {
    using T = decltype(tag);
    const bool reduce = reduction != CeReduction::kNone;
    float* ws = static_cast<float*>(workspace);
    const CeArgs a{n,
                   c,
                   d,
                   labels,
                   label_dtype == DType::kInt64,
                   weight,
                   weight_dtype,
                   has_ignore_index,
                   ignore_index,
                   reduce,
                   loss,
                   reduce ? ws : nullptr,
                   reduce ? ws + n * d : nullptr,
                   bad_label};
    if constexpr (!std::is_same_v<T, float>) {
      if (widened)
        return launch(static_cast<const T*>(scores), static_cast<float*>(log_prob), a, reduction,
                      stream);
    }
    launch(static_cast<const T*>(scores), static_cast<T*>(log_prob), a, reduction, stream);
  });
}

}  // namespace ampc::kernels::cuda
