// The data-parallel communication ops of the "ampc" domain (schemas and semantics:
// ops/schemas/comm_schemas.h) on the CPU: AllReduceStart starts a non-blocking sum over the ranks
// of runtime/dist/collectives.h, AllReduceWait waits for it; AllReduceSum sums at once, and
// BatchStatistics passes a synchronised BatchNorm's batch statistics on. Without collectives (a
// process not launched by mpirun) the world has one rank and both are copies (with the casts).
#include <cstring>

#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"
#include "runtime/dist/collectives.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu {
namespace {

void store(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::kFloat32:
      t.data<float>()[i] = static_cast<float>(v);
      return;
    case DType::kFloat16:
      t.data<Half>()[i] = float_to_half(static_cast<float>(v));
      return;
    case DType::kBFloat16:
      t.data<BFloat16>()[i] = float_to_bf16(static_cast<float>(v));
      return;
    default:
      t.data<double>()[i] = v;
  }
}

// `out` = `in` converted to out's dtype, times `factor` (applied in the wider type).
void convert(const Tensor& in, Tensor& out, double factor) {
  const int64_t n = in.numel();
  if (in.dtype() == out.dtype() && factor == 1.0) {
    std::memcpy(out.raw(), in.raw(), in.nbytes());
    return;
  }
  if (in.dtype() == DType::kFloat64) {
    for (int64_t i = 0; i < n; ++i) store(out, i, in.data<double>()[i] * factor);
    return;
  }
  if (in.dtype() == DType::kFloat32 && out.dtype() == DType::kFloat32) {
    const auto f = static_cast<float>(factor);
    const float* x = in.data<float>();
    float* y = out.data<float>();
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * f;
    return;
  }
  // f32 (into another dtype), f16 or bf16: the product in fp32.
  const auto f = static_cast<float>(factor);
  for (int64_t i = 0; i < n; ++i) store(out, i, static_cast<float>(float_element(in, i)) * f);
}

// AllReduceStart(G1..Gn) -> R1..Rn: Ri = Gi / world in the dtype `to`, and the sum of the Ri
// over the ranks started in place (DDP's mean: divided before the sum, so that a low dtype
// overflows only where the mean would).
void all_reduce_start(OpContext& ctx) {
  const int n = ctx.num_inputs();
  if (ctx.num_outputs() != n) ctx.fail("needs one output per gradient");
  const plan::AllReduceParams& p = plan::params<plan::AllReduceParams>(ctx.step());
  const auto to = static_cast<DType>(p.to());
  const int64_t bucket = p.bucket();
  if (!is_float(to)) ctx.fail("cannot reduce in " + std::string(dtype_name(to)));
  dist::Collectives* c = dist::current();
  const int world = c ? c->world() : 1;
  for (int i = 0; i < n; ++i) {
    const Tensor& g = ctx.in(i);
    if (!is_float(g.dtype())) ctx.unsupported_dtype(i);
    Tensor& r = ctx.output(i, to, g.shape());
    convert(g, r, 1.0 / world);
    if (c && world > 1) c->start_sum(bucket, r.raw(), r.numel(), to);
  }
  if (c && world > 1) c->bucket_started(bucket);
}

// AllReduceWait(R1..Rn) -> G1'..Gn': waits for the bucket's sums, converts them to `to`.
void all_reduce_wait(OpContext& ctx) {
  const int n = ctx.num_inputs();
  if (ctx.num_outputs() != n) ctx.fail("needs one output per reduced gradient");
  const plan::AllReduceParams& p = plan::params<plan::AllReduceParams>(ctx.step());
  const auto to = static_cast<DType>(p.to());
  if (!is_float(to)) ctx.fail("cannot return gradients of " + std::string(dtype_name(to)));
  dist::Collectives* c = dist::current();
  if (c && c->world() > 1) c->wait(p.bucket());
  for (int i = 0; i < n; ++i) {
    const Tensor& r = ctx.in(i);
    convert(r, ctx.output(i, to, r.shape()), 1.0);
  }
}

// AllReduceSum(X) -> Y: Y = the sum of X over the ranks, blocking (synchronised BatchNorm's
// statistics and their gradients, passes/sync_batch_norm.h). One rank: a copy.
void all_reduce_sum(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (!is_float(x.dtype())) ctx.unsupported_dtype(0);
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  convert(x, y, 1.0);
  dist::Collectives* c = dist::current();
  if (c && c->world() > 1)
    c->sum_now(y.raw(), y.numel(), y.dtype(),
               "the synchronised BatchNorm's all-reduce " + ctx.label());
}

// BatchStatistics(running_mean, running_var, batch_mean, batch_var) -> (mean, var): the
// batch's statistics in training (inference_mode.h selects the running ones instead).
void batch_statistics(OpContext& ctx) {
  if (ctx.num_inputs() != 4 || ctx.num_outputs() != 2) ctx.fail("needs 4 inputs and 2 outputs");
  for (int i = 0; i < 2; ++i) {
    const Tensor& batch = ctx.in(2 + i);
    Tensor& out = ctx.output(i, batch.dtype(), batch.shape());
    std::memcpy(out.raw(), batch.raw(), batch.nbytes());
  }
}

}  // namespace

void register_comm_ops(OpRegistry& r) {
  r.add("AllReduceStart", all_reduce_start, "ampc");
  r.add("AllReduceWait", all_reduce_wait, "ampc");
  r.add("AllReduceSum", all_reduce_sum, "ampc");
  r.add("BatchStatistics", batch_statistics, "ampc");
}

}  // namespace ampc::rt::cpu
