// MatMul and Gemm steps through cuBLASLt (blas_lt.h), with what the compiler folded into
// them (lower/gemm_epilogue.h; the CPU backend's runtime/cpu/library_step.h): operand
// transposes and the epilogues BIAS, RELU, RELU_BIAS, BGRADB, all in the step's GemmParams.
#include <array>
#include <memory>

#include "kernels/cuda/reduce.h"
#include "runtime/cuda/blas_lt.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/op_builders.h"
#include "runtime/plan/gemm_rules.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cuda {
namespace {

const plan::GemmParams& gemm_params(const StepContext& ctx) {
  return plan::params<plan::GemmParams>(ctx.step());
}

GemmEpilogue epilogue_of(const StepContext& ctx) {
  switch (gemm_params(ctx).epilogue()) {
    case plan::GemmParams::NONE:
      return GemmEpilogue::kNone;
    case plan::GemmParams::BIAS:
      return GemmEpilogue::kBias;
    case plan::GemmParams::RELU:
      return GemmEpilogue::kRelu;
    case plan::GemmParams::RELU_BIAS:
      return GemmEpilogue::kReluBias;
    case plan::GemmParams::BGRADB:
      return GemmEpilogue::kBiasGradB;
    default:
      break;
  }
  ctx.fail("the CUDA backend does not support the GEMM epilogue " +
           plan::gemm_epilogue_name(ctx.step()) + " (BIAS, RELU, RELU_BIAS and BGRADB are)");
}

// A bias that adds the same n values to every row: [n], [1, n], [1, 1, n]...
bool is_row_vector(const std::vector<int64_t>& shape, int64_t n) {
  if (shape.empty() || shape.back() != n) return false;
  for (size_t i = 0; i + 1 < shape.size(); ++i) {
    if (shape[i] != 1) return false;
  }
  return true;
}

// The GEMM and, when cuBLASLt has no algorithm with the bias-gradient epilogue, the column
// sums of B by the reduction kernel after a plain GEMM.
struct GemmCall {
  std::shared_ptr<LtMatmul> gemm;
  DevPtr a, b, c, d, bias;
  WorkspacePtr workspace;
  bool reduce_b = false;
  DType b_dtype = DType::kFloat32;
  std::vector<int64_t> b_dims;
  std::array<bool, 8> reduced{};  // every axis of B but the last

  void operator()(cudaStream_t stream) const {
    void* ws = workspace.get();
    gemm->run(a.get(), b.get(), c.get(), d.get(), bias.get(), ws, stream);
    if (!reduce_b) return;
    kernels::cuda::reduce(kernels::cuda::ReduceOp::kSum, b_dtype, b.get(), bias.get(),
                          static_cast<int>(b_dims.size()), b_dims.data(), reduced.data(), ws,
                          stream);
  }
};

// A GEMM step as the builders see it before any library call: the shape, the operands, the
// input that holds the bias (-1: none).
struct GemmPlan {
  GemmShape s;
  DevPtr a, b, c;
  int bias_input = -1;
};

// The epilogue's extra operand checked (no library call): the bias a row of the output's
// columns, BGRADB's second output and the rule of runtime/plan/gemm_rules.h.
void check_epilogue(const StepContext& ctx, GemmPlan& p) {
  GemmShape& s = p.s;
  if (ctx.out_dtype(0) != s.dtype) ctx.fail("the output's type differs from the operands'");
  if (s.epilogue == GemmEpilogue::kBias || s.epilogue == GemmEpilogue::kReluBias) {
    if (p.bias_input < 0)
      ctx.fail("epilogue " + plan::gemm_epilogue_name(ctx.step()) + " needs a bias");
    if (!is_row_vector(ctx.in_shape(p.bias_input), s.n))
      ctx.fail("the bias " + describe_buffer(ctx.input(p.bias_input)) +
               " is not a row of the output's " + std::to_string(s.n) + " columns");
    s.bias_dtype = ctx.in_dtype(p.bias_input);
  }
  if (ctx.plan().memory().workspace_bytes() <= 0) ctx.fail("the plan reserves no GEMM workspace");
  if (s.epilogue == GemmEpilogue::kBiasGradB) {
    if (!ctx.has_output(1)) ctx.fail("epilogue BGRADB needs a second output");
    if (!plan::bias_grad_b_foldable(ctx.in_dtype(1), ctx.out_dtype(1), ctx.in_shape(1).size(),
                                    s.trans_b, ctx.has_input(2))) {
      ctx.fail("epilogue BGRADB of B " + describe_buffer(ctx.input(1)) + " into " +
               describe_buffer(ctx.output(1)) +
               " is not supported (B must be a matrix, not transposed, of the bias gradient's "
               "type, on a GEMM without C: runtime/plan/gemm_rules.h)");
    }
    if (ctx.out_numel(1) != s.n) {
      ctx.fail("the bias gradient " + describe_buffer(ctx.output(1)) + " does not have " +
               std::to_string(s.n) + " elements");
    }
    s.bias_dtype = ctx.out_dtype(1);
  }
}

// The step's GEMM once its shape is checked: the heuristic queried (falling back for BGRADB
// to the reduction kernel), workspace reserved.
Launch finish(StepContext& ctx, GemmPlan p) {
  check_epilogue(ctx, p);
  GemmShape& s = p.s;
  const std::string label = ctx.label();
  GemmCall call;
  call.a = p.a;
  call.b = p.b;
  call.c = p.c;
  call.d = ctx.out(0);
  if (p.bias_input >= 0) call.bias = ctx.in(p.bias_input);
  const int64_t plan_workspace = ctx.plan().memory().workspace_bytes();
  if (s.epilogue == GemmEpilogue::kBiasGradB) {
    call.bias = ctx.out(1);
    std::shared_ptr<LtMatmul> fused;
    if (s.batch == 1)
      fused = std::make_shared<LtMatmul>(ctx.handles().lt, s, plan_workspace, label, false);
    if (!fused || !fused->ok()) {
      // Column sums of B by the reduction kernel, after the plain GEMM.
      call.reduce_b = true;
      call.b_dtype = ctx.in_dtype(1);
      call.b_dims = ctx.in_shape(1);
      for (size_t i = 0; i + 1 < call.b_dims.size(); ++i) call.reduced[i] = true;
      const size_t need = kernels::cuda::reduce_workspace_bytes(
          kernels::cuda::ReduceOp::kSum, call.b_dtype, static_cast<int>(call.b_dims.size()),
          call.b_dims.data(), call.reduced.data());
      s.epilogue = GemmEpilogue::kNone;
      fused.reset();
      call.workspace = ctx.workspace(std::max<int64_t>(static_cast<int64_t>(need), plan_workspace));
    }
    if (fused) {
      call.gemm = fused;
      call.workspace = ctx.workspace(plan_workspace);
      return call;
    }
  }
  call.gemm = std::make_shared<LtMatmul>(ctx.handles().lt, s, plan_workspace, label);
  if (!call.reduce_b) call.workspace = ctx.workspace(plan_workspace);
  return call;
}

GemmPlan plan_matmul(const StepContext& ctx) {
  ctx.require_dtype(0, {DType::kFloat32, DType::kFloat16, DType::kBFloat16});
  if (ctx.in_dtype(1) != ctx.in_dtype(0)) ctx.fail("A and B have different element types");
  GemmShape s;
  s.dtype = ctx.in_dtype(0);
  const plan::GemmParams& params = gemm_params(ctx);
  // cuBLASLt has one batch stride: lowering folds such views for the CPU target only.
  if (params.perm_a_size() || params.perm_b_size() || params.perm_y_size())
    ctx.fail(
        "reads or writes a transposed view (a plan compiled for --target cpu); compile "
        "for a CUDA target");
  s.trans_a = gemm_params(ctx).trans_a();  // a MatMul's are folded Transposes
  s.trans_b = gemm_params(ctx).trans_b();
  s.epilogue = epilogue_of(ctx);
  const std::vector<int64_t> sa = ctx.in_shape(0), sb = ctx.in_shape(1);
  const size_t ra = sa.size(), rb = sb.size();
  if (ra == 0 || rb == 0) ctx.fail("MatMul of a scalar");
  if ((s.trans_a && ra < 2) || (s.trans_b && rb < 2))
    ctx.fail("a folded transpose needs rank >= 2");
  if (ra == 1) {
    s.m = 1;
    s.k = sa[0];
  } else {
    s.m = s.trans_a ? sa[ra - 1] : sa[ra - 2];
    s.k = s.trans_a ? sa[ra - 2] : sa[ra - 1];
  }
  const int64_t kb = rb == 1 ? sb[0] : (s.trans_b ? sb[rb - 1] : sb[rb - 2]);
  s.n = rb == 1 ? 1 : (s.trans_b ? sb[rb - 2] : sb[rb - 1]);
  if (kb != s.k) ctx.fail("inner dimensions differ: " + shape_str(sa) + " x " + shape_str(sb));
  // Batch dimensions: numpy broadcasting, but each operand either has all of them or none.
  const std::vector<int64_t> ba(sa.begin(), sa.end() - std::min<size_t>(ra, 2));
  const std::vector<int64_t> bb(sb.begin(), sb.end() - std::min<size_t>(rb, 2));
  const size_t rbatch = std::max(ba.size(), bb.size());
  std::vector<int64_t> out_batch(rbatch, 1);
  auto dim = [](const std::vector<int64_t>& v, size_t i, size_t r) {
    return i + v.size() < r ? int64_t{1} : v[i + v.size() - r];
  };
  for (size_t i = 0; i < rbatch; ++i) {
    const int64_t x = dim(ba, i, rbatch), y = dim(bb, i, rbatch);
    if (x != y && x != 1 && y != 1) ctx.fail("batch dimensions do not broadcast");
    out_batch[i] = std::max(x, y);
  }
  s.batch = numel_of(out_batch);
  auto stride = [&](const std::vector<int64_t>& b, int64_t matrix, const char* name) -> int64_t {
    if (numel_of(b) == 1) return 0;
    for (size_t i = 0; i < rbatch; ++i) {
      if (dim(b, i, rbatch) != out_batch[i]) {
        ctx.fail(std::string("operand ") + name +
                 " broadcasts over only some batch dimensions, which the CUDA backend's "
                 "strided-batch GEMM does not support");
      }
    }
    return matrix;
  };
  s.stride_a = stride(ba, s.m * s.k, "A");
  s.stride_b = stride(bb, s.k * s.n, "B");
  s.stride_d = s.m * s.n;
  if (s.batch * s.m * s.n != ctx.out_numel(0))
    ctx.fail("the output " + describe_buffer(ctx.output(0)) + " does not hold the product");
  // One big GEMM when B is shared and A's rows follow each other: [batch * m, k] x [k, n].
  if (s.batch > 1 && s.stride_b == 0 && s.stride_a != 0 && !s.trans_a) {
    s.m *= s.batch;
    s.batch = 1;
    s.stride_a = s.stride_d = 0;
  }
  if (s.batch == 1) s.stride_a = s.stride_b = s.stride_d = 0;
  const bool bias = s.epilogue == GemmEpilogue::kBias || s.epilogue == GemmEpilogue::kReluBias;
  return {s, ctx.in(0), ctx.in(1), DevPtr{}, bias ? 2 : -1};
}

GemmPlan plan_gemm(const StepContext& ctx) {
  ctx.require_dtype(0, {DType::kFloat32, DType::kFloat16, DType::kBFloat16});
  if (ctx.in_dtype(1) != ctx.in_dtype(0)) ctx.fail("A and B have different element types");
  const plan::GemmParams& params = gemm_params(ctx);
  GemmShape s;
  s.dtype = ctx.in_dtype(0);
  s.trans_a = params.trans_a();  // Gemm's own transA combined with a folded Transpose
  s.trans_b = params.trans_b();
  s.alpha = params.alpha();
  const float beta = params.beta();
  s.epilogue = epilogue_of(ctx);
  const std::vector<int64_t> sa = ctx.in_shape(0), sb = ctx.in_shape(1);
  if (sa.size() != 2 || sb.size() != 2) ctx.fail("Gemm operands must be matrices");
  s.m = s.trans_a ? sa[1] : sa[0];
  s.k = s.trans_a ? sa[0] : sa[1];
  s.n = s.trans_b ? sb[0] : sb[1];
  if ((s.trans_b ? sb[1] : sb[0]) != s.k) ctx.fail("inner dimensions differ");
  if (ctx.out_numel(0) != s.m * s.n) ctx.fail("the output does not hold the product");
  // The Gemm's own C: a full matrix scaled by beta, or a row added as the bias epilogue.
  int bias_input = -1;
  DevPtr c;
  if (s.epilogue == GemmEpilogue::kBias) s.epilogue = GemmEpilogue::kNone;  // C is the bias
  if (s.epilogue == GemmEpilogue::kReluBias) s.epilogue = GemmEpilogue::kRelu;
  if (ctx.has_input(2) && beta != 0.0f) {
    const std::vector<int64_t> sc = ctx.in_shape(2);
    if (ctx.in_dtype(2) != s.dtype) ctx.fail("C's type differs from A's");
    if (numel_of(sc) == s.m * s.n && (sc.size() == 2 || s.m == 1)) {
      s.has_c = true;
      s.beta = beta;
      c = ctx.in(2);
    } else if (is_row_vector(sc, s.n) && beta == 1.0f && s.epilogue != GemmEpilogue::kBiasGradB) {
      s.epilogue =
          s.epilogue == GemmEpilogue::kRelu ? GemmEpilogue::kReluBias : GemmEpilogue::kBias;
      bias_input = 2;
    } else {
      ctx.fail("C " + describe_buffer(ctx.input(2)) + " with beta " + std::to_string(beta) +
               " is not supported by the CUDA backend (a full [M, N] matrix, or a row of N "
               "with beta 1)");
    }
  }
  return {s, ctx.in(0), ctx.in(1), c, bias_input};
}

GemmPlan plan_of(const StepContext& ctx) {
  return ctx.step().op() == "Gemm" ? plan_gemm(ctx) : plan_matmul(ctx);
}

Launch build_gemm_step(StepContext& ctx) {
  return finish(ctx, plan_of(ctx));
}

}  // namespace

bool uses_cublaslt(const plan::Step& step) {
  return step.domain().empty() && (step.op() == "MatMul" || step.op() == "Gemm");
}

void check_gemm_step(StepContext& ctx) {
  GemmPlan p = plan_of(ctx);
  check_epilogue(ctx, p);
}

void register_gemm_ops(BuilderTable& t) {
  t.add("", "MatMul", build_gemm_step);
  t.add("", "Gemm", build_gemm_step);
}

}  // namespace ampc::rt::cuda
