// Dropout on kernels/cuda/dropout.h, with its parameters (plan.proto's DropoutParams) and
// inputs read as the CPU operator reads them (runtime/cpu/ops/elementwise_convert.cc), except
// that the ratio (input 1) and training_mode (input 2) must be constants of the plan, as
// PyTorch's export writes them. RandomUniform, RandomNormal and their *Like forms on
// kernels/cuda/random.h, their attributes read as the CPU operator reads them
// (runtime/cpu/ops/random_ops.cc); the output's shape and type are the plan's. Without a `seed`
// attribute the key is the run's (StepContext::run_key, written by the executor before each
// run) mixed with the step's index, exactly the CPU executor's key, so both backends draw the
// same masks and values for the same seed and run.
#include "base/half.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/random.h"
#include "runtime/cuda/op_builders.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cuda {
namespace {

namespace kc = kernels::cuda;

// The value of scalar constant input k of a float or bool type, as a double.
double constant_scalar(const StepContext& ctx, int k, const std::string& what) {
  const Tensor t = ctx.constant(k, what);
  if (t.numel() != 1) ctx.fail(what + " must be a scalar");
  switch (t.dtype()) {
    case DType::kFloat32:
      return t.data<float>()[0];
    case DType::kFloat64:
      return t.data<double>()[0];
    case DType::kFloat16:
      return half_to_float(t.data<Half>()[0]);
    case DType::kBFloat16:
      return bf16_to_float(t.data<BFloat16>()[0]);
    case DType::kBool:
      return t.data<bool>()[0] ? 1 : 0;
    default:
      ctx.fail(what + " of type " + t.type_str() + " is not supported by the CUDA backend");
  }
}

Launch build_dropout(StepContext& ctx) {
  const plan::DropoutParams& p = plan::params<plan::DropoutParams>(ctx.step());
  double ratio = p.default_ratio();
  bool training = false;
  if (p.mode_inputs()) {
    if (ctx.has_input(1)) ratio = constant_scalar(ctx, 1, "the ratio");
    if (ctx.has_input(2)) {
      if (ctx.in_dtype(2) != DType::kBool) ctx.fail("training_mode must be bool");
      training = constant_scalar(ctx, 2, "training_mode") != 0;
    }
  }
  if (training && (ratio < 0 || ratio >= 1))
    ctx.fail("ratio " + std::to_string(ratio) + " is outside [0, 1)");
  training = training && ratio > 0;
  ctx.require_dtype(0, {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16});
  require_same_type(ctx);
  const DType dtype = ctx.in_dtype(0);
  const DType mask_type = p.mask_bool() ? DType::kBool : dtype;
  if (ctx.has_output(1) && ctx.out_dtype(1) != mask_type)
    ctx.fail("the mask must be " + std::string(dtype_name(mask_type)));
  const int64_t n = ctx.in_numel(0);
  const DevPtr x = ctx.in(0), y = ctx.out(0), mask = ctx.out(1);
  const bool seeded = p.seeded();
  const uint64_t fixed = static_cast<uint64_t>(p.seed());
  const int64_t step = ctx.index();
  RunKeyPtr run{};
  if (training && !seeded) run = ctx.run_key();
  return [=](cudaStream_t stream) {
    kernels::shared::DropoutKey key{
        .run = run.memory ? run.get() : nullptr, .step = step, .fixed = fixed};
    void* m = mask.get();
    kc::dropout(dtype, x.get(), y.get(),
                mask_type == DType::kBool ? static_cast<bool*>(m) : nullptr,
                mask_type == DType::kBool ? nullptr : m, n, ratio, training, key, stream);
  };
}

// RandomUniform(Like) and RandomNormal(Like): the *Like forms' input gives only the shape,
// which the plan's output already has, so no input is read.
template <bool kNormal>
Launch build_random(StepContext& ctx) {
  const cpu::OpContext& a = ctx.attrs();
  ctx.require_dtype(0, {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16},
                    /*output=*/true);
  const DType dtype = ctx.out_dtype(0);
  const int64_t n = ctx.out_numel(0);
  const kernels::shared::RandomDraw draw{
      .normal = kNormal,
      .a = kNormal ? a.attr_float("mean", 0.0f) : a.attr_float("low", 0.0f),
      .b = kNormal ? a.attr_float("scale", 1.0f) : a.attr_float("high", 1.0f)};
  const bool seeded = a.has_attr("seed");
  const uint64_t fixed = seeded ? kernels::shared::seed_key(a.attr_float("seed", 0)) : 0;
  const int64_t step = ctx.index();
  RunKeyPtr run{};
  if (!seeded) run = ctx.run_key();
  const DevPtr y = ctx.out(0);
  return [=](cudaStream_t stream) {
    kernels::shared::DropoutKey key{
        .run = run.memory ? run.get() : nullptr, .step = step, .fixed = fixed};
    kc::random_fill(dtype, y.get(), n, draw, key, stream);
  };
}

}  // namespace

void register_random_ops(BuilderTable& t) {
  t.add("", "Dropout", build_dropout);
  t.add("", "RandomUniform", build_random<false>);
  t.add("", "RandomUniformLike", build_random<false>);
  t.add("", "RandomNormal", build_random<true>);
  t.add("", "RandomNormalLike", build_random<true>);
}

}  // namespace ampc::rt::cuda
