// RandomUniform, RandomNormal, RandomUniformLike and RandomNormalLike: a VAE's
// torch.randn_like noise, nn.RReLU's slopes. Each element from kernels/shared/random_math.h
// under the step's key: the op's `seed` attribute when it has one (the same values every
// step), else the executor's random state (new values every step, reproducible and resumable,
// as Dropout's masks; OpContext::random_key). The *Like forms take their input's shape, and
// its type unless `dtype` says otherwise; the others take `shape`, and float unless `dtype`.
#include "kernels/cpu/elementwise_types.h"
#include "kernels/shared/random_math.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"
#include "runtime/cpu/ops/tensor_common.h"

namespace ampc::rt::cpu {
namespace {

namespace kc = kernels::cpu;
namespace ks = kernels::shared;

template <bool kNormal, bool kLike>
void random_op(OpContext& ctx) {
  DType dtype = kLike ? ctx.in(0).dtype() : DType::kFloat32;
  if (ctx.has_attr("dtype")) dtype = static_cast<DType>(ctx.attr_int("dtype"));
  const Shape shape = kLike ? ctx.in(0).shape() : Shape(ctx.attr_ints("shape"));
  const uint64_t key = ctx.has_attr("seed")
                           ? static_cast<uint64_t>(static_cast<int64_t>(ctx.attr_float("seed", 0)))
                           : ctx.random_key();
  const double a = kNormal ? ctx.attr_float("mean", 0.0f) : ctx.attr_float("low", 0.0f);
  const double b = kNormal ? ctx.attr_float("scale", 1.0f) : ctx.attr_float("high", 1.0f);
  if (!kc::visit_dtype<kc::kFloats>(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        Tensor& y = ctx.output(0, dtype, shape);
        T* out = y.data<T>();
        for (int64_t i = 0; i < y.numel(); ++i) {
          const auto at = static_cast<uint64_t>(i);
          const double v =
              kNormal ? ks::normal_value(key, at, a, b) : ks::uniform_value(key, at, a, b);
          out[i] = kc::store<T>(static_cast<kc::opmath_t<T>>(v));
        }
      })) {
    ctx.fail("dtype " + std::string(dtype_name(dtype)) + " is not a float type");
  }
}

}  // namespace

void register_random_ops(OpRegistry& r) {
  r.add("RandomUniform", random_op<false, false>);
  r.add("RandomNormal", random_op<true, false>);
  r.add("RandomUniformLike", random_op<false, true>);
  r.add("RandomNormalLike", random_op<true, true>);
}

}  // namespace ampc::rt::cpu
