// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss over inputs [N, C, D1, ..., Dk]
// with targets [N, D1, ..., Dk]: reduction none / sum / mean, ignore_index, class weights (the
// typed parameters legalize gives both ops).
#include "kernels/cpu/loss.h"
#include "kernels/twin/cross_entropy.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu::nn {
namespace {

namespace k = kernels::cpu;

// By plan::CrossEntropyParams::Reduction (MEAN, SUM, NONE).
constexpr k::LossReduction kReductions[] = {k::LossReduction::kMean, k::LossReduction::kSum,
                                            k::LossReduction::kNone};

int64_t label_at(const Tensor& target, int64_t i) {
  return target.dtype() == DType::kInt64 ? target.data<int64_t>()[i] : target.data<int32_t>()[i];
}

// The flat position of the first target outside [0, c) that is not ignored, or -1.
int64_t first_bad_label(const Tensor& target, int64_t c, bool has_ignore, int64_t ignore) {
  for (int64_t i = 0; i < target.numel(); ++i) {
    const int64_t label = label_at(target, i);
    if (!(has_ignore && label == ignore) && (label < 0 || label >= c)) return i;
  }
  return -1;
}

// With softmax (SoftmaxCrossEntropyLoss) input 0 holds scores, and output 1 (optional)
// receives their log-softmax over the class axis; otherwise input 0 holds log-probabilities.
template <bool softmax, typename T>
void nll(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& target = ctx.in(1);
  const Tensor* weight = ctx.input(2);
  if (x.rank() < 2) ctx.fail("input " + x.type_str() + " must have at least 2 dimensions");
  const int64_t n = x.dim(0), c = x.dim(1), d = product(x.shape(), 2, x.shape().size());
  std::vector<int64_t> target_shape = x.shape();
  target_shape.erase(target_shape.begin() + 1);
  if (target.shape() != target_shape) {
    ctx.fail("target " + target.type_str() + " does not match input " + x.type_str());
  }
  if (weight && weight->shape() != std::vector<int64_t>{c}) {
    ctx.fail("weight " + weight->type_str() + " does not have one value per class");
  }
  const plan::CrossEntropyParams& p = plan::params<plan::CrossEntropyParams>(ctx.step());
  const k::LossReduction reduction = kReductions[p.reduction()];
  Tensor& loss = ctx.output(
      0, x.dtype(), reduction == k::LossReduction::kNone ? target_shape : std::vector<int64_t>{});
  const bool has_ignore = p.has_ignore_index();
  const int64_t ignore = p.ignore_index();
  if (target.dtype() != DType::kInt64 && target.dtype() != DType::kInt32) {
    ctx.unsupported_dtype(1);
  }
  const int64_t bad = first_bad_label(target, c, has_ignore, ignore);
  if (bad >= 0) {
    ctx.fail("target " + std::to_string(label_at(target, bad)) + " at position " +
             std::to_string(bad) + " is not a class index in [0, " + std::to_string(c) + ")");
  }
  const T* w = weight ? weight->data<T>() : nullptr;
  if constexpr (softmax) {
    // The CUDA kernel's host side (kernels/twin/cross_entropy.h): the GPU's bits. The
    // log-probabilities go straight into the planned buffer where there is one: a fresh tensor
    // of the scores' size, zeroed, page-faulted and copied every step cost more than the op
    // itself on large vocabularies. None when the output is omitted.
    Tensor fresh;
    Tensor* log_prob = nullptr;
    if (ctx.has_output(1)) {
      log_prob = ctx.placed_apart(1, x.dtype(), x.shape());
      if (!log_prob) log_prob = &(fresh = Tensor(x.dtype(), x.shape()));
    }
    using kernels::shared::CeReduction;
    const CeReduction red = reduction == k::LossReduction::kNone  ? CeReduction::kNone
                            : reduction == k::LossReduction::kSum ? CeReduction::kSum
                                                                  : CeReduction::kMean;
    std::vector<float> workspace(
        kernels::twin::softmax_cross_entropy_workspace_bytes(n, c, d, red) / sizeof(float));
    kernels::twin::softmax_cross_entropy(
        x.dtype(), x.data<T>(), target.dtype(), target.raw(), n, c, d, x.dtype(), w, has_ignore,
        ignore, red, loss.data<T>(), log_prob ? log_prob->data<T>() : nullptr, workspace.data());
    if (log_prob == &fresh) ctx.set_output(1, std::move(fresh));
  } else {
    auto run = [&](auto label_tag) {
      using L = decltype(label_tag);
      k::nll_loss(x.data<T>(), target.data<L>(), n, c, d, w, has_ignore, ignore, reduction,
                  loss.data<T>());
    };
    dispatch<int64_t, int32_t>(target.dtype(), run);
  }
}

template <bool softmax>
void nll_op(OpContext& ctx) {
  dispatch_float(ctx, [&](auto tag) { nll<softmax, decltype(tag)>(ctx); });
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
  add_widened(r, "NegativeLogLikelihoodLoss", nll_op<false>);
  add_widened(r, "SoftmaxCrossEntropyLoss", nll_op<true>);
}

}  // namespace ampc::rt::cpu::nn
