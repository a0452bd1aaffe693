// RandomUniform, RandomNormal, RandomUniformLike and RandomNormalLike: a VAE's
// torch.randn_like noise, nn.RReLU's slopes. Each element from kernels/shared/random_math.h
// under the step's key: the op's `seed` attribute when it has one (the same values every
// step), else the executor's random state (new values every step, reproducible and resumable,
// as Dropout's masks; OpContext::random_key). The *Like forms take their input's shape, and
// its type unless `dtype` says otherwise; the others take `shape`, and float unless `dtype`.
#include "kernels/twin/random.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"
#include "runtime/cpu/ops/tensor_common.h"

namespace ampc::rt::cpu {
namespace {

namespace ks = kernels::shared;

template <bool kNormal, bool kLike>
void random_op(OpContext& ctx) {
  DType dtype = kLike ? ctx.in(0).dtype() : DType::kFloat32;
  if (ctx.has_attr("dtype")) dtype = static_cast<DType>(ctx.attr_int("dtype"));
  if (!is_float(dtype))
    ctx.fail("dtype " + std::string(dtype_name(dtype)) + " is not a float type");
  const Shape shape = kLike ? ctx.in(0).shape() : Shape(ctx.attr_ints("shape"));
  const uint64_t key =
      ctx.has_attr("seed") ? ks::seed_key(ctx.attr_float("seed", 0)) : ctx.random_key();
  const ks::RandomDraw draw{
      .normal = kNormal,
      .a = kNormal ? ctx.attr_float("mean", 0.0f) : ctx.attr_float("low", 0.0f),
      .b = kNormal ? ctx.attr_float("scale", 1.0f) : ctx.attr_float("high", 1.0f)};
  Tensor& y = ctx.output(0, dtype, shape);
  kernels::twin::random_fill(dtype, y.raw(), y.numel(), draw, ks::DropoutKey{.fixed = key});
}

}  // namespace

void register_random_ops(OpRegistry& r) {
  r.add("RandomUniform", random_op<false, false>);
  r.add("RandomNormal", random_op<true, false>);
  r.add("RandomUniformLike", random_op<false, true>);
  r.add("RandomNormalLike", random_op<true, true>);
}

}  // namespace ampc::rt::cpu
