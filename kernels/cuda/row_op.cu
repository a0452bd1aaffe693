// The generic row-wise ops. inner == 1: a row per warp (n < 1024) or per block of 256 / 512
// threads; each pass folds the thread's part of the row (from registers when the row fits,
// CachedRow) and reduces the parts in rowwise_tree.h's order, then the outputs. inner > 1: a
// thread per column walks its n elements in order (loads coalesced across the columns).
#include <string>

#include "base/error.h"
#include "kernels/cuda/row_kernel.cuh"
#include "kernels/cuda/row_op.h"
#include "kernels/shared/row_ops.h"
#include "kernels/shared/rowwise_device.h"
#include "kernels/shared/rowwise_dispatch.h"

namespace ampc::kernels::cuda {
namespace {

namespace sh = kernels::shared;

// Row r's per-channel operands (entry r % channels of each).
template <typename Spec>
__device__ __forceinline__ void load_row_operands(const sh::RowOperands& ops, int64_t r,
                                                  float* per_row) {
#pragma unroll
  for (int k = 0; k < Spec::kRowOperands; ++k)
    per_row[k] = sh::load_dyn(ops.data[k], r % ops.channels, ops.dtype);
}

template <typename Spec, int kThreads, typename T, typename Src>
__device__ __forceinline__ void spec_row(const Src& src, int64_t row, T* yr, int64_t n, float* smem,
                                         const sh::RowArgs& a, const sh::RowOperands& ops) {
  float stats[sh::stats_size<Spec>()] = {};
#pragma unroll
  for (int k = 0; k < Spec::kPasses; ++k) {
    const sh::PassCombine<Spec> combine{k};
    float part = src.fold(Spec::template init<float>(k), [&](float acc, float v) {
      return combine(acc, Spec::term(k, v, stats, a));
    });
    part = sh::block_tree(part, kThreads, smem, combine);
    stats[k] = Spec::finish(k, part, n, a);
  }
  float per_row[sh::row_operands_size<Spec>()] = {};
  load_row_operands<Spec>(ops, row, per_row);
  src.for_each([&](int64_t j, float v) { sh::store_f(yr, j, Spec::value(v, stats, per_row, a)); });
}

template <typename Spec, typename T, int kThreads>
__global__ void __launch_bounds__(sh::block_threads(kThreads))
    spec_rows(const T* x, T* y, int64_t outer, int64_t n, sh::RowArgs a, sh::RowOperands ops) {
  with_block_row<kThreads>(x, outer, n, [&](const auto& part, int64_t row, float* smem) {
    spec_row<Spec, kThreads>(part, row, y + row * n, n, smem, a, ops);
  });
}

template <typename Spec, typename T>
__global__ void spec_columns(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                             sh::RowArgs a, sh::RowOperands ops) {
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= outer * inner) return;
  const int64_t o = id / inner, i = id % inner;
  const T* xc = x + o * n * inner + i;
  T* yc = y + o * n * inner + i;
  float stats[sh::stats_size<Spec>()] = {};
  for (int k = 0; k < Spec::kPasses; ++k) {
    float acc = Spec::template init<float>(k);
    for (int64_t r = 0; r < n; ++r)
      acc = Spec::combine(k, acc, Spec::term(k, sh::load_f(xc, r * inner), stats, a));
    stats[k] = Spec::finish(k, acc, n, a);
  }
  float per_row[sh::row_operands_size<Spec>()] = {};
  load_row_operands<Spec>(ops, id, per_row);  // row o * inner + i
  for (int64_t r = 0; r < n; ++r)
    sh::store_f(yc, r * inner, Spec::value(sh::load_f(xc, r * inner), stats, per_row, a));
}

template <typename Spec, typename T>
void launch(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, const sh::RowArgs& a,
            const sh::RowOperands& ops, cudaStream_t stream) {
  const char* what = Spec::kOp;
  if (inner > 1) {
    const unsigned blocks = sh::grid_of(sh::ceil_div(outer * inner, 256), what);
    spec_columns<Spec, T><<<blocks, 256, 0, stream>>>(x, y, outer, n, inner, a, ops);
    return;
  }
  switch (sh::row_plan(n).threads) {
    case 32:
      spec_rows<Spec, T, 32><<<sh::grid_of(sh::ceil_div(outer, sh::kRowsPerWarpBlock), what),
                               32 * sh::kRowsPerWarpBlock, 0, stream>>>(x, y, outer, n, a, ops);
      break;
    case 256:
      spec_rows<Spec, T, 256><<<sh::grid_of(outer, what), 256, 0, stream>>>(x, y, outer, n, a, ops);
      break;
    default:
      spec_rows<Spec, T, 512><<<sh::grid_of(outer, what), 512, 0, stream>>>(x, y, outer, n, a, ops);
  }
}

}  // namespace

void row_op(sh::RowOp op, DType dtype, const void* x, void* y, int64_t outer, int64_t n,
            int64_t inner, const sh::RowArgs& args, const sh::RowOperands& operands,
            cudaStream_t stream) {
  const bool known = sh::visit_row_op(op, [&](auto spec) {
    using Spec = decltype(spec);
    if (Spec::kRowOperands > 0) {  // checked here: the kernel reads their type at run time
      sh::dispatch_float_types(operands.dtype, Spec::kOp, [](auto) {});
      if (operands.channels <= 0)
        throw Error(std::string(Spec::kOp) + ": no channels for the per-channel operands");
    }
    sh::dispatch_float_types(dtype, Spec::kOp, [&](auto tag) {
      using T = decltype(tag);
      if (outer <= 0 || n <= 0 || inner <= 0) return;
      launch<Spec>(static_cast<const T*>(x), static_cast<T*>(y), outer, n, inner, args, operands,
                   stream);
      sh::check_launch(Spec::kOp);
    });
  });
  if (!known) throw Error("row_op: unknown row op " + std::to_string(static_cast<int>(op)));
}

}  // namespace ampc::kernels::cuda
