// Softmax / LogSoftmax, LayerNormalization, InstanceNormalization, the generic row ops,
// SoftmaxCrossEntropyLoss, the Reduce* ops, the loss scaler's ops (ampc UnscaleCheck,
// UpdateScale, ClipGradNorm), ampc.RangeStats, pooling and BatchNormalization on the
// hand-written kernels (kernels/cuda). The row-wise ops, reductions, BatchNormalization and the
// loss read their typed parameters and the geometry the CPU operators derive from them
// (runtime/plan/step_params.h; pooling's window through the CPU operators' window_geometry,
// runtime/cpu/ops/nn_util.h).
#include <algorithm>
#include <array>
#include <iterator>
#include <memory>
#include <optional>

#include "kernels/cuda/amp.h"
#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/copy.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/pool.h"
#include "kernels/cuda/range_stats.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/row_op.h"
#include "kernels/cuda/softmax.h"
#include "kernels/shared/range_stats.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/cuda/op_builders.h"
#include "runtime/plan/row_op_params.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cuda {
namespace {

namespace kc = kernels::cuda;

constexpr std::initializer_list<DType> kFloats = {DType::kFloat32, DType::kFloat16,
                                                  DType::kBFloat16};

Launch build_softmax(StepContext& ctx) {
  ctx.require_dtype(0, kFloats);
  const plan::RowwiseParams& p = plan::params<plan::RowwiseParams>(ctx.step());
  const auto [outer, n, inner] = plan::row_shape(p, ctx.in_shape(0));
  require_same_type(ctx);
  if (p.kind() == plan::RowwiseParams::HARDMAX) ctx.fail("Hardmax has no CUDA kernel");
  const bool log = p.kind() == plan::RowwiseParams::LOG_SOFTMAX;
  const DType dtype = ctx.in_dtype(0);
  const DevPtr x = ctx.in(0), y = ctx.out(0);
  return [=](cudaStream_t stream) {
    if (outer * n * inner == 0) return;
    kc::softmax(dtype, x.get(), y.get(), outer, n, inner, log, stream);
  };
}

// ampc.SoftmaxGrad(dY, Y) -> dX; dY of Y's type or, with f32 Y, 16-bit read widened.
Launch build_softmax_grad(StepContext& ctx) {
  ctx.require_dtype(1, kFloats);
  if (ctx.in_shape(0) != ctx.in_shape(1) ||
      !kernels::shared::grad_input_fits(ctx.in_dtype(0), ctx.in_dtype(1)))
    ctx.fail("dY does not match Y");
  const plan::RowwiseParams& p = plan::params<plan::RowwiseParams>(ctx.step());
  const auto [outer, n, inner] = plan::row_shape(p, ctx.in_shape(1));
  const bool log = p.kind() == plan::RowwiseParams::LOG_SOFTMAX;
  const DType dtype = ctx.in_dtype(1), dy_dtype = ctx.in_dtype(0);
  const DevPtr dy = ctx.in(0), y = ctx.in(1), dx = ctx.out(0);
  return [=](cudaStream_t stream) {
    if (outer * n * inner == 0) return;
    kc::softmax_grad(dtype, dy_dtype, y.get(), dy.get(), dx.get(), outer, n, inner, log, stream);
  };
}

// The generic row ops (kernels/shared/row_ops.h): one builder for the whole list. The
// per-channel operands are inputs 1.., one value per channel (x's dimension 1).
template <typename Spec>
Launch build_row_op(StepContext& ctx) {
  ctx.require_dtype(0, kFloats);
  const plan::RowwiseParams& p = plan::params<plan::RowwiseParams>(ctx.step());
  const std::optional<kernels::shared::RowOp> op = plan::row_op_of(p.kind());
  if (!op) ctx.fail("internal: the step's row-wise kind is not a generic row op");
  const std::vector<int64_t> dims = ctx.in_shape(0);
  const auto [outer, n, inner] = plan::row_shape(p, dims);
  kernels::shared::RowOperands operands;
  std::array<DevPtr, kernels::shared::kMaxRowOperands> held;
  if constexpr (Spec::kRowOperands > 0) {
    if (dims.size() < 2) ctx.fail("input has no channel dimension");
    operands.channels = dims[1];
    operands.dtype = ctx.in_dtype(1);
    for (int k = 1; k <= Spec::kRowOperands; ++k) {
      ctx.require_dtype(k, kFloats);
      if (ctx.in_numel(k) != operands.channels)
        ctx.fail("input " + std::to_string(k) + " must hold one value per channel");
      if (ctx.in_dtype(k) != operands.dtype)
        ctx.fail("the per-channel inputs have different element types");
      held[k - 1] = ctx.in(k);
    }
  }
  const kernels::shared::RowArgs args = plan::row_args(p);
  const DType dtype = ctx.in_dtype(0);
  require_same_type(ctx);
  const DevPtr x = ctx.in(0), y = ctx.out(0);
  return [=, op = *op](cudaStream_t stream) mutable {
    if (outer * n * inner == 0) return;
    for (int k = 0; k < Spec::kRowOperands; ++k) operands.data[k] = held[k].get();
    kc::row_op(op, dtype, x.get(), y.get(), outer, n, inner, args, operands, stream);
  };
}

Launch build_layer_norm(StepContext& ctx) {
  ctx.require_dtype(0, kFloats);
  const plan::RowwiseParams& p = plan::params<plan::RowwiseParams>(ctx.step());
  const plan::RowShape shape = plan::row_shape(p, ctx.in_shape(0));
  const int64_t rows = shape.outer, cols = shape.n;
  ctx.require_dtype(1, kFloats);
  if (ctx.in_numel(1) != cols || (ctx.has_input(2) && ctx.in_numel(2) != cols))
    ctx.fail("scale and bias must have the normalised shape (broadcast ones are not supported)");
  if (ctx.has_input(2) && ctx.in_dtype(2) != ctx.in_dtype(1))
    ctx.fail("scale and bias have different element types");
  const auto stash = static_cast<DType>(p.stash_type());
  for (int k = 1; k <= 2; ++k) {
    if (ctx.has_output(k) && (ctx.out_dtype(k) != stash || ctx.out_numel(k) != rows))
      ctx.fail("output " + std::to_string(k) + " must hold one stash_type value per row");
  }
  const float eps = p.epsilon();
  const DType xt = ctx.in_dtype(0), pt = ctx.in_dtype(1);
  const DevPtr x = ctx.in(0), scale = ctx.in(1), bias = ctx.in(2), y = ctx.out(0),
               mean = ctx.out(1), inv = ctx.out(2);
  return [=](cudaStream_t stream) {
    if (rows * cols == 0) return;
    kc::layer_norm(xt, x.get(), rows, cols, pt, scale.get(), bias.get(), eps, y.get(), stash,
                   mean.get(), inv.get(), stream);
  };
}

// ampc.LayerNormalizationGrad(dY, X, scale) -> dX, dScale, dB (each optional); dY of X's type
// or, with f32 X, 16-bit read widened.
Launch build_layer_norm_grad(StepContext& ctx) {
  ctx.require_dtype(1, kFloats);
  ctx.require_dtype(2, kFloats);
  if (ctx.in_shape(0) != ctx.in_shape(1) ||
      !kernels::shared::grad_input_fits(ctx.in_dtype(0), ctx.in_dtype(1)))
    ctx.fail("dY does not match X");
  const plan::RowwiseParams& p = plan::params<plan::RowwiseParams>(ctx.step());
  const plan::RowShape shape = plan::row_shape(p, ctx.in_shape(1));
  const int64_t rows = shape.outer, cols = shape.n;
  const DType xt = ctx.in_dtype(1), dyt = ctx.in_dtype(0), pt = ctx.in_dtype(2);
  if (ctx.in_numel(2) != cols) ctx.fail("scale must have the normalised shape");
  for (int k = 1; k <= 2; ++k) {
    if (ctx.has_output(k) && (ctx.out_dtype(k) != pt || ctx.out_numel(k) != cols))
      ctx.fail("output " + std::to_string(k) + " must have scale's shape and type");
  }
  const float eps = p.epsilon();
  const DevPtr dy = ctx.in(0), x = ctx.in(1), scale = ctx.in(2), dx = ctx.out(0),
               dscale = ctx.out(1), dbias = ctx.out(2);
  const WorkspacePtr ws =
      ctx.workspace(static_cast<int64_t>(kc::layer_norm_grad_workspace_bytes(xt, rows, cols)));
  return [=](cudaStream_t stream) {
    kc::layer_norm_grad(xt, dyt, x.get(), dy.get(), rows, cols, pt, scale.get(), eps, dx.get(),
                        dscale.get(), dbias.get(), ws.get(), stream);
  };
}

Launch build_cross_entropy(StepContext& ctx) {
  ctx.require_dtype(0, kFloats);
  ctx.require_dtype(1, {DType::kInt32, DType::kInt64});
  const std::vector<int64_t> s = ctx.in_shape(0);
  if (s.size() < 2) ctx.fail("scores must have at least 2 dimensions");
  const int64_t n = s[0], c = s[1], d = product(s, 2, s.size());
  if (ctx.in_numel(1) != n * d) ctx.fail("labels do not fit the scores");
  const plan::CrossEntropyParams& p = plan::params<plan::CrossEntropyParams>(ctx.step());
  const kc::CeReduction reduction =
      p.reduction() == plan::CrossEntropyParams::NONE  ? kc::CeReduction::kNone
      : p.reduction() == plan::CrossEntropyParams::SUM ? kc::CeReduction::kSum
                                                       : kc::CeReduction::kMean;
  const DType dtype = ctx.in_dtype(0), labels_t = ctx.in_dtype(1);
  DType weight_t = DType::kFloat32;
  if (ctx.has_input(2)) {
    ctx.require_dtype(2, kFloats);
    weight_t = ctx.in_dtype(2);
    if (ctx.in_numel(2) != c) ctx.fail("weights must hold one value per class");
  }
  // ampc.SoftmaxCrossEntropyLoss reads 16-bit scores widened, its outputs f32.
  const bool widened = ctx.step().domain() == "ampc";
  const DType out =
      kernels::shared::ce_output_type(dtype, widened ? DType::kFloat32 : DType::kUndefined);
  if (out == DType::kUndefined) ctx.fail("scores must be float16 or bfloat16");
  if (widened && ctx.has_input(2) && weight_t != DType::kFloat32)
    ctx.fail("weights must be float32");
  if (ctx.out_dtype(0) != out || (ctx.has_output(1) && ctx.out_dtype(1) != out))
    ctx.fail(widened ? "outputs must be float32" : "outputs must have the scores' type");
  const bool has_ignore = p.has_ignore_index();
  const int64_t ignore = p.ignore_index();
  const WorkspacePtr ws = ctx.workspace(
      static_cast<int64_t>(kc::softmax_cross_entropy_workspace_bytes(n, c, d, reduction)));
  const DevPtr scores = ctx.in(0), labels = ctx.in(1), weight = ctx.in(2), loss = ctx.out(0),
               log_prob = ctx.out(1);
  const FlagPtr bad = ctx.error_flag(
      "a label is out of range of the classes (the loss is NaN there; the CPU backend refuses "
      "such a label)");
  return [=](cudaStream_t stream) {
    kc::softmax_cross_entropy(dtype, scores.get(), labels_t, labels.get(), n, c, d, weight_t,
                              weight.get(), has_ignore, ignore, reduction, loss.get(),
                              log_prob.get(), ws.get(), stream, bad.get(), out);
  };
}

// The kernels' reduction of a typed kind (every kind but LOG_SUM_EXP, which has no kernel),
// indexed by plan::ReduceParams::Kind.
kc::ReduceOp cuda_reduce_op(const StepContext& ctx, plan::ReduceParams::Kind kind) {
  using R = kc::ReduceOp;
  static constexpr R kOps[] = {R::kSum, R::kMean, R::kProd,   R::kMax,         R::kMin,
                               R::kL1,  R::kL2,   R::kLogSum, R::kSum /*LSE*/, R::kSumSquare};
  static_assert(static_cast<size_t>(plan::ReduceParams::Kind_ARRAYSIZE) == std::size(kOps));
  if (kind == plan::ReduceParams::LOG_SUM_EXP) ctx.fail("this reduction has no CUDA kernel");
  return kOps[kind];
}

Launch build_reduce(StepContext& ctx) {
  const plan::ReduceParams& p = plan::params<plan::ReduceParams>(ctx.step());
  const kc::ReduceOp op = cuda_reduce_op(ctx, p.kind());
  ctx.require_dtype(0, kFloats);
  require_same_type(ctx);
  const std::vector<int64_t> dims = ctx.in_shape(0);
  const auto rank = static_cast<int64_t>(dims.size());
  if (rank > 8) ctx.fail("more than 8 dimensions");
  const DType dtype = ctx.in_dtype(0);
  const DevPtr x = ctx.in(0), y = ctx.out(0);
  const int64_t numel = ctx.in_numel(0);
  if (p.runtime_axes()) ctx.fail("axes computed at run time are not supported");
  const std::optional<std::vector<bool>> flags = plan::reduced_axes(p, rank);
  if (!flags) {
    return [=](cudaStream_t stream) {
      if (numel > 0) kc::contiguous_copy(dtype, x.get(), y.get(), numel, stream);
    };
  }
  std::array<bool, 8> reduced{};
  std::copy(flags->begin(), flags->end(), reduced.begin());
  const WorkspacePtr ws = ctx.workspace(static_cast<int64_t>(
      kc::reduce_workspace_bytes(op, dtype, static_cast<int>(rank), dims.data(), reduced.data())));
  const int64_t out_numel = ctx.out_numel(0);
  return [=](cudaStream_t stream) {
    if (out_numel == 0) return;
    kc::reduce(op, dtype, x.get(), y.get(), static_cast<int>(dims.size()), dims.data(),
               reduced.data(), ws.get(), stream);
  };
}

// The gradients of a multi-tensor op: inputs [first, first + count), outputs likewise.
struct TensorList {
  std::vector<DType> dtypes;
  std::vector<int64_t> numels;
  std::vector<DevPtr> ins, outs;

  std::vector<const void*> in_pointers() const { return addresses<const void*>(ins); }
  std::vector<void*> out_pointers() const { return addresses<void*>(outs); }
};

// `outputs_optional`: an omitted output is a null pointer (UnscaleCheck's checked-only
// gradients), not a mismatch.
TensorList tensor_list(const StepContext& ctx, int first_in, int first_out, int count,
                       bool outputs_optional = false) {
  TensorList l;
  for (int j = 0; j < count; ++j) {
    ctx.require_dtype(first_in + j,
                      {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16});
    l.dtypes.push_back(ctx.in_dtype(first_in + j));
    l.numels.push_back(ctx.in_numel(first_in + j));
    l.ins.push_back(ctx.in(first_in + j));
    if (first_out >= 0 && outputs_optional && !ctx.has_output(first_out + j)) {
      l.outs.push_back(ctx.out(first_out + j));  // null
    } else if (first_out >= 0) {
      if (ctx.out_dtype(first_out + j) != l.dtypes.back() ||
          ctx.out_numel(first_out + j) != l.numels.back())
        ctx.fail("output " + std::to_string(first_out + j) + " does not match its gradient");
      l.outs.push_back(ctx.out(first_out + j));
    }
  }
  return l;
}

Launch build_unscale_check(StepContext& ctx) {
  const int n = ctx.num_inputs() - 1;
  if (ctx.num_outputs() != n + 1) ctx.fail("needs found_inf and one output per gradient");
  if (ctx.in_dtype(0) != DType::kFloat32 || ctx.in_numel(0) != 1)
    ctx.fail("inv_scale must be an f32 scalar");
  if (ctx.out_dtype(0) != DType::kBool || ctx.out_numel(0) != 1)
    ctx.fail("found_inf must be a bool scalar");
  auto l = std::make_shared<TensorList>(tensor_list(ctx, 1, 1, n, true));
  const DevPtr inv = ctx.in(0), found = ctx.out(0);
  return [=](cudaStream_t stream) {
    const auto ins = l->in_pointers();
    const auto outs = l->out_pointers();
    kc::unscale_check(n, l->dtypes.data(), ins.data(), outs.data(), l->numels.data(), inv.get(),
                      found.get(), stream);
  };
}

Launch build_update_scale(StepContext& ctx) {
  const plan::ScaleUpdateParams& p = plan::params<plan::ScaleUpdateParams>(ctx.step());
  if (ctx.in_dtype(0) != DType::kFloat32 || ctx.in_dtype(1) != DType::kInt32 ||
      ctx.in_dtype(2) != DType::kBool || ctx.out_dtype(0) != DType::kFloat32 ||
      ctx.out_dtype(1) != DType::kInt32)
    ctx.fail("expects scale (f32), growth_tracker (i32), found_inf (bool)");
  const float growth = p.growth_factor(), backoff = p.backoff_factor();
  const int64_t interval = p.growth_interval();
  const bool has_min = p.has_min_scale(), has_max = p.has_max_scale();
  const float min_scale = p.min_scale(), max_scale = p.max_scale();
  const DevPtr scale = ctx.in(0), tracker = ctx.in(1), found = ctx.in(2), new_scale = ctx.out(0),
               new_tracker = ctx.out(1);
  return [=](cudaStream_t stream) {
    kc::update_scale(scale.get(), tracker.get(), found.get(), growth, backoff, interval, has_min,
                     min_scale, has_max, max_scale, new_scale.get(), new_tracker.get(), stream);
  };
}

Launch build_clip_grad_norm(StepContext& ctx) {
  const int n = ctx.num_inputs();
  const plan::ClipParams& p = plan::params<plan::ClipParams>(ctx.step());
  const bool clip = p.clip();
  if (ctx.num_outputs() != (clip ? n + 1 : 1)) ctx.fail("unexpected number of outputs");
  if (ctx.out_dtype(0) != DType::kFloat32) ctx.fail("the total norm must be f32");
  auto l = std::make_shared<TensorList>(tensor_list(ctx, 0, clip ? 1 : -1, n));
  const float max_norm = p.max_norm();
  const WorkspacePtr ws =
      ctx.workspace(static_cast<int64_t>(kc::clip_grad_norm_workspace_bytes(n, l->numels.data())));
  const DevPtr total = ctx.out(0);
  return [=](cudaStream_t stream) {
    const auto ins = l->in_pointers();
    auto outs = l->out_pointers();
    kc::clip_grad_norm(n, l->dtypes.data(), ins.data(), clip ? outs.data() : nullptr,
                       l->numels.data(), clip, max_norm, total.get(), ws.get(), stream);
  };
}

// The CPU backend's window geometry for X's spatial dimensions.
kc::PoolGeometry pool_geometry(const StepContext& ctx, const std::vector<int64_t>& x) {
  cpu::nn::check_spatial_rank(ctx.attrs(), static_cast<int64_t>(x.size()));
  const std::vector<int64_t> in(x.begin() + 2, x.end());
  return cpu::nn::window_geometry(ctx.attrs(), in, {});  // a ConvGeom: a PoolGeometry
}

// A pooling step's launch, skipped for an empty batch: max(stream) for the max-pooling op,
// else average(include_pad, stream) with the op's count_include_pad.
template <typename Max, typename Average>
Launch pool_launch(const StepContext& ctx, bool is_max, int64_t planes, Max max, Average average) {
  if (is_max) {
    return [=](cudaStream_t stream) {
      if (planes == 0) return;
      max(stream);
    };
  }
  const bool include_pad = plan::params<plan::WindowParams>(ctx.step()).count_include_pad();
  return [=](cudaStream_t stream) {
    if (planes == 0) return;
    average(include_pad, stream);
  };
}

Launch build_pool(StepContext& ctx) {
  const std::vector<int64_t> x = ctx.in_shape(0);
  const kc::PoolGeometry g = pool_geometry(ctx, x);
  const int64_t planes = x[0] * x[1];
  const DType dtype = ctx.in_dtype(0);
  require_same_type(ctx);
  const DevPtr in = ctx.in(0), out = ctx.out(0), indices = ctx.out(1);
  const bool is_max = ctx.step().op() == "MaxPool";
  if (is_max && ctx.has_output(1) && ctx.out_dtype(1) != DType::kInt64)
    ctx.fail("Indices must be int64");
  const bool column_major =
      is_max && plan::params<plan::WindowParams>(ctx.step()).column_major_indices();
  return pool_launch(
      ctx, is_max, planes,
      [=](cudaStream_t stream) {
        kc::max_pool(dtype, g, planes, in.get(), out.get(), static_cast<int64_t*>(indices.get()),
                     column_major, stream);
      },
      [=](bool include_pad, cudaStream_t stream) {
        kc::average_pool(dtype, g, planes, in.get(), out.get(), include_pad, stream);
      });
}

Launch build_pool_grad(StepContext& ctx) {
  // Inputs dY, X; output dX.
  const std::vector<int64_t> x = ctx.in_shape(1);
  const kc::PoolGeometry g = pool_geometry(ctx, x);
  const int64_t planes = x[0] * x[1];
  const DType dtype = ctx.in_dtype(1);
  if (ctx.in_dtype(0) != dtype || ctx.out_dtype(0) != dtype)
    ctx.fail("dY, X and dX must share a type");
  const DevPtr dy = ctx.in(0), xp = ctx.in(1), dx = ctx.out(0);
  return pool_launch(
      ctx, ctx.step().op() == "MaxPoolGrad", planes,
      [=](cudaStream_t stream) {
        kc::max_pool_grad(dtype, g, planes, xp.get(), dy.get(), dx.get(), stream);
      },
      [=](bool include_pad, cudaStream_t stream) {
        kc::average_pool_grad(dtype, g, planes, dy.get(), dx.get(), include_pad, stream);
      });
}

Launch build_global_average_pool(StepContext& ctx) {
  const std::vector<int64_t> x = ctx.in_shape(0);
  if (x.size() < 3) ctx.fail("input must have spatial dimensions");
  const int64_t planes = x[0] * x[1], spatial = product(x, 2, x.size());
  const DType dtype = ctx.in_dtype(0);
  require_same_type(ctx);
  const DevPtr in = ctx.in(0), out = ctx.out(0);
  return [=](cudaStream_t stream) {
    if (planes == 0) return;
    kc::global_average_pool(dtype, planes, spatial, in.get(), out.get(), stream);
  };
}

Launch build_batch_norm(StepContext& ctx) {
  const std::vector<int64_t> x = ctx.in_shape(0);
  if (x.size() < 2) ctx.fail("X must have a channel dimension");
  const int64_t n = x[0], c = x[1], spatial = product(x, 2, x.size());
  const plan::BatchNormParams& p = plan::params<plan::BatchNormParams>(ctx.step());
  const bool training = p.training();
  const DType xt = ctx.in_dtype(0), pt = ctx.in_dtype(1), st = ctx.in_dtype(3);
  if (ctx.in_dtype(2) != pt || ctx.in_dtype(4) != st) ctx.fail("scale/B or mean/var types differ");
  for (int k = 1; k <= 4; ++k) {
    if (ctx.in_numel(k) != c)
      ctx.fail("input " + std::to_string(k) + " must hold one value per channel");
  }
  for (int k = 1; k <= 4; ++k) {
    if (ctx.has_output(k) && (ctx.out_dtype(k) != st || ctx.out_numel(k) != c))
      ctx.fail("output " + std::to_string(k) + " must hold one statistic per channel");
  }
  const float eps = p.epsilon(), momentum = p.momentum();
  const DevPtr xp = ctx.in(0), scale = ctx.in(1), bias = ctx.in(2), mean = ctx.in(3),
               var = ctx.in(4), y = ctx.out(0), rm = ctx.out(1), rv = ctx.out(2);
  const bool saved = p.saved_statistics();
  const DevPtr sm = saved ? ctx.out(3) : DevPtr{}, sv = saved ? ctx.out(4) : DevPtr{};
  if (!training) {
    return [=](cudaStream_t stream) {
      if (n * c * spatial == 0) return;
      kc::batch_norm_inference(xt, pt, st, xp.get(), n, c, spatial, scale.get(), bias.get(),
                               mean.get(), var.get(), eps, y.get(), stream);
    };
  }
  const WorkspacePtr ws =
      ctx.workspace(static_cast<int64_t>(kc::batch_norm_training_workspace_bytes(n, c, spatial)));
  return [=](cudaStream_t stream) {
    kc::batch_norm_training(xt, pt, st, xp.get(), n, c, spatial, scale.get(), bias.get(),
                            mean.get(), var.get(), eps, momentum, y.get(), rm.get(), rv.get(),
                            sm.get(), sv.get(), ws.get(), stream);
  };
}

// ampc.BatchNormalizationGrad(dY, X, scale) -> dX, dScale, dBias (each optional).
Launch build_batch_norm_grad(StepContext& ctx) {
  const std::vector<int64_t> x = ctx.in_shape(1);
  if (x.size() < 2) ctx.fail("X must have a channel dimension");
  if (ctx.in_shape(0) != x || ctx.in_dtype(0) != ctx.in_dtype(1)) ctx.fail("dY does not match X");
  const int64_t n = x[0], c = x[1], spatial = product(x, 2, x.size());
  const DType xt = ctx.in_dtype(1), pt = ctx.in_dtype(2);
  if (ctx.in_numel(2) != c) ctx.fail("scale must hold one value per channel");
  for (int k = 1; k <= 2; ++k) {
    if (ctx.has_output(k) && (ctx.out_dtype(k) != pt || ctx.out_numel(k) != c))
      ctx.fail("output " + std::to_string(k) + " must hold one value per channel of scale's type");
  }
  const float eps = plan::params<plan::BatchNormParams>(ctx.step()).epsilon();
  const DevPtr dy = ctx.in(0), xp = ctx.in(1), scale = ctx.in(2), dx = ctx.out(0),
               dscale = ctx.out(1), dbias = ctx.out(2);
  const WorkspacePtr ws =
      ctx.workspace(static_cast<int64_t>(kc::batch_norm_grad_workspace_bytes(n, c, spatial)));
  return [=](cudaStream_t stream) {
    kc::batch_norm_grad(xt, pt, xp.get(), dy.get(), n, c, spatial, scale.get(), eps, dx.get(),
                        dscale.get(), dbias.get(), ws.get(), stream);
  };
}

// ampc.RangeStats(x, [enabled], [scale]) -> kSize doubles (runtime/cpu/ops/range_stats_op.cc);
// `enabled` is read on the device, so a disabled step costs almost nothing.
Launch build_range_stats(StepContext& ctx) {
  ctx.require_dtype(0, kFloats);
  if (ctx.has_input(1) && (ctx.in_dtype(1) != DType::kBool || ctx.in_numel(1) != 1))
    ctx.fail("enabled must be a bool scalar");
  if (ctx.has_input(2) && (ctx.in_dtype(2) != DType::kFloat32 || ctx.in_numel(2) != 1))
    ctx.fail("scale must be an f32 scalar");
  if (ctx.out_dtype(0) != DType::kFloat64 || ctx.out_numel(0) != kernels::range_stats::kSize)
    ctx.fail("the output must hold the statistics' doubles");
  const WorkspacePtr ws = ctx.workspace(kernels::range_stats::kWorkBytes);
  const DType dtype = ctx.in_dtype(0);
  const int64_t n = ctx.in_numel(0);
  const DevPtr x = ctx.in(0), enabled = ctx.in(1), scale = ctx.in(2), out = ctx.out(0);
  return [=](cudaStream_t stream) {
    kc::range_stats(dtype, x.get(), n, enabled.get(), scale.get(), out.get(), ws.get(), stream);
  };
}

}  // namespace

void register_nn_ops(BuilderTable& t) {
  t.add("ampc", "RangeStats", build_range_stats);
  t.add("", "Softmax", build_softmax);
  t.add("", "LogSoftmax", build_softmax);
  t.add("ampc", "SoftmaxGrad", build_softmax_grad);
  t.add("", "LayerNormalization", build_layer_norm);
#define AMPC_ROW_OP_BUILDER(NAME, SPEC) \
  t.add("", kernels::shared::SPEC::kOp, build_row_op<kernels::shared::SPEC>);
  AMPC_ROW_OPS(AMPC_ROW_OP_BUILDER)
#undef AMPC_ROW_OP_BUILDER
  t.add("", "SoftmaxCrossEntropyLoss", build_cross_entropy);
  t.add("ampc", "SoftmaxCrossEntropyLoss", build_cross_entropy);  // 16-bit scores, f32 outputs
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceProd", "ReduceMax", "ReduceMin",
                         "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceSumSquare"})
    t.add("", op, build_reduce);
  t.add("ampc", "UnscaleCheck", build_unscale_check);
  t.add("ampc", "UpdateScale", build_update_scale);
  t.add("ampc", "ClipGradNorm", build_clip_grad_norm);
  t.add("", "MaxPool", build_pool);
  t.add("", "AveragePool", build_pool);
  t.add("", "GlobalAveragePool", build_global_average_pool);
  // The bf16 pooling ops autocast writes (ONNX's have no bf16 in opsets up to 17).
  t.add("ampc", "MaxPool", build_pool);
  t.add("ampc", "AveragePool", build_pool);
  t.add("ampc", "GlobalAveragePool", build_global_average_pool);
  t.add("ampc", "MaxPoolGrad", build_pool_grad);
  t.add("ampc", "AveragePoolGrad", build_pool_grad);
  t.add("", "BatchNormalization", build_batch_norm);
  t.add("ampc", "BatchNormalizationGrad", build_batch_norm_grad);
  t.add("ampc", "LayerNormalizationGrad", build_layer_norm_grad);
}

}  // namespace ampc::rt::cuda
