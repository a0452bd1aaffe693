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

// The checked shapes and parameters of a loss step: input 0 [N, C, D1, ..., Dk], targets
// [N, D1, ..., Dk] of int32 or int64 that are class indices or the ignore_index, weights [C].
struct LossStep {
  int64_t n = 0, c = 0, d = 0;
  std::vector<int64_t> target_shape;
  k::LossReduction reduction = k::LossReduction::kMean;
  bool has_ignore = false;
  int64_t ignore = 0;
};

LossStep checked_loss_step(const OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& target = ctx.in(1);
  const Tensor* weight = ctx.input(2);
  if (x.rank() < 2) ctx.fail("input " + x.type_str() + " must have at least 2 dimensions");
  LossStep s;
  s.n = x.dim(0);
  s.c = x.dim(1);
  s.d = product(x.shape(), 2, x.shape().size());
  s.target_shape = x.shape();
  s.target_shape.erase(s.target_shape.begin() + 1);
  if (target.shape() != s.target_shape) {
    ctx.fail("target " + target.type_str() + " does not match input " + x.type_str());
  }
  if (weight && weight->shape() != std::vector<int64_t>{s.c}) {
    ctx.fail("weight " + weight->type_str() + " does not have one value per class");
  }
  const plan::CrossEntropyParams& p = plan::params<plan::CrossEntropyParams>(ctx.step());
  s.reduction = kReductions[p.reduction()];
  s.has_ignore = p.has_ignore_index();
  s.ignore = p.ignore_index();
  if (target.dtype() != DType::kInt64 && target.dtype() != DType::kInt32) {
    ctx.unsupported_dtype(1);
  }
  const int64_t bad = first_bad_label(target, s.c, s.has_ignore, s.ignore);
  if (bad >= 0) {
    ctx.fail("target " + std::to_string(label_at(target, bad)) + " at position " +
             std::to_string(bad) + " is not a class index in [0, " + std::to_string(s.c) + ")");
  }
  return s;
}

// SoftmaxCrossEntropyLoss: input 0 holds scores, and output 1 (optional) receives their
// log-softmax over the class axis, both outputs of type `out` (the scores' type, or float for
// the 16-bit scores of ampc.SoftmaxCrossEntropyLoss, read widened). The CUDA kernel's host side
// (kernels/twin/cross_entropy.h): the GPU's bits. The log-probabilities go straight into the
// planned buffer where there is one: a fresh tensor of the scores' size, zeroed, page-faulted
// and copied every step cost more than the op itself on large vocabularies. None when the
// output is omitted.
void softmax_cross_entropy(OpContext& ctx, DType out) {
  const LossStep s = checked_loss_step(ctx);
  const Tensor& x = ctx.in(0);
  const Tensor& target = ctx.in(1);
  const Tensor* weight = ctx.input(2);
  Tensor& loss = ctx.output(
      0, out, s.reduction == k::LossReduction::kNone ? s.target_shape : std::vector<int64_t>{});
  Tensor fresh;
  Tensor* log_prob = nullptr;
  if (ctx.has_output(1)) {
    log_prob = ctx.placed_apart(1, out, x.shape());
    if (!log_prob) log_prob = &(fresh = Tensor(out, x.shape()));
  }
  using kernels::shared::CeReduction;
  const CeReduction red = s.reduction == k::LossReduction::kNone  ? CeReduction::kNone
                          : s.reduction == k::LossReduction::kSum ? CeReduction::kSum
                                                                  : CeReduction::kMean;
  std::vector<float> workspace(
      kernels::twin::softmax_cross_entropy_workspace_bytes(s.n, s.c, s.d, red) / sizeof(float));
  kernels::twin::softmax_cross_entropy(x.dtype(), x.raw(), target.dtype(), target.raw(), s.n, s.c,
                                       s.d, weight ? weight->dtype() : x.dtype(),
                                       weight ? weight->raw() : nullptr, s.has_ignore, s.ignore,
                                       red, loss.raw(), log_prob ? log_prob->raw() : nullptr,
                                       workspace.data(), nullptr, out);
  if (log_prob == &fresh) ctx.set_output(1, std::move(fresh));
}

// NegativeLogLikelihoodLoss: input 0 holds log-probabilities.
template <typename T>
void nll(OpContext& ctx) {
  const LossStep s = checked_loss_step(ctx);
  const Tensor& x = ctx.in(0);
  const Tensor* weight = ctx.input(2);
  Tensor& loss =
      ctx.output(0, x.dtype(),
                 s.reduction == k::LossReduction::kNone ? s.target_shape : std::vector<int64_t>{});
  const T* w = weight ? weight->data<T>() : nullptr;
  auto run = [&](auto label_tag) {
    using L = decltype(label_tag);
    k::nll_loss(x.data<T>(), ctx.in(1).data<L>(), s.n, s.c, s.d, w, s.has_ignore, s.ignore,
                s.reduction, loss.data<T>());
  };
  dispatch<int64_t, int32_t>(ctx.in(1).dtype(), run);
}

void nll_op(OpContext& ctx) {
  dispatch_float(ctx, [&](auto tag) { nll<decltype(tag)>(ctx); });
}

// ONNX's op in f32 or f64 (16-bit scores widened around it by add_widened).
void cross_entropy_op(OpContext& ctx) {
  dispatch_float(ctx, [&](auto) { softmax_cross_entropy(ctx, ctx.in(0).dtype()); });
}

// ampc.SoftmaxCrossEntropyLoss: f16 or bf16 scores read widened, float outputs.
void widened_cross_entropy_op(OpContext& ctx) {
  const DType t = ctx.in(0).dtype();
  if (t != DType::kBFloat16 && t != DType::kFloat16) ctx.unsupported_dtype(0);
  if (const Tensor* w = ctx.input(2); w && w->dtype() != DType::kFloat32) ctx.unsupported_dtype(2);
  softmax_cross_entropy(ctx, DType::kFloat32);
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
  add_widened(r, "NegativeLogLikelihoodLoss", nll_op);
  add_widened(r, "SoftmaxCrossEntropyLoss", cross_entropy_op);
  r.add("SoftmaxCrossEntropyLoss", widened_cross_entropy_op, "ampc");
}

}  // namespace ampc::rt::cpu::nn
