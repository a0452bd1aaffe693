// MatMul (numpy semantics: batched, broadcast batch dimensions, 1-D operands) and Gemm.
#include <type_traits>

#include "base/half.h"
#include "kernels/cpu/dnnl_matmul.h"
#include "kernels/cpu/matmul.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu::nn {
namespace {

namespace k = kernels::cpu;

// Batch entries smaller than this many multiply-adds run in parallel (each GEMM then runs on
// its own thread) when together they are worth a parallel region.
constexpr int64_t kSmallGemm = 1 << 18;
constexpr int64_t kParallelWork = 1 << 20;

// c[m, n] = a[m, kk] x b[kk, n], row-major and contiguous.
template <typename T>
void mm(int64_t m, int64_t n, int64_t kk, const T* a, const T* b, T* c) {
  if constexpr (std::is_floating_point_v<T>) {
    k::gemm(false, false, m, n, kk, T(1), a, kk, b, n, T(0), c, n);
  } else {
    k::gemm_naive(false, false, m, n, kk, a, kk, b, n, c, n);
  }
}

// The batch structure of a numpy MatMul: output shape, batch entries and each entry's
// matrix offsets into A and B (0 stride along broadcast dimensions).
struct MatmulGeom {
  std::vector<int64_t> out_shape;
  int64_t m = 0, n = 0, kk = 0, nb = 0;
  bool shared_b = false;     // one B for all entries, A entries contiguous: stack the A matrices
  bool plain_batch = false;  // entry j at j * m * kk in A and j * kk * n in B
  std::vector<int64_t> a_off, b_off;
};

MatmulGeom matmul_geometry(const OpContext& ctx, const Tensor& a, const Tensor& b) {
  MatmulGeom g;
  std::vector<int64_t> as = a.shape(), bs = b.shape();
  if (as.empty() || bs.empty()) ctx.fail("inputs of rank 0 are not allowed");
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  g.m = as[as.size() - 2];
  g.kk = as.back();
  g.n = bs.back();
  if (bs[bs.size() - 2] != g.kk) {
    ctx.fail("inner dimensions of " + a.type_str() + " and " + b.type_str() + " do not match");
  }
  // Batch dimensions, right-aligned and broadcast.
  const size_t ra = as.size() - 2, rb = bs.size() - 2, rank = std::max(ra, rb);
  std::vector<int64_t> batch(rank), a_dim(rank, 1), b_dim(rank, 1);
  for (size_t i = 0; i < ra; ++i) a_dim[rank - ra + i] = as[i];
  for (size_t i = 0; i < rb; ++i) b_dim[rank - rb + i] = bs[i];
  for (size_t i = 0; i < rank; ++i) {
    if (a_dim[i] != b_dim[i] && a_dim[i] != 1 && b_dim[i] != 1) {
      ctx.fail("batch dimensions of " + a.type_str() + " and " + b.type_str() +
               " do not broadcast");
    }
    batch[i] = a_dim[i] == 1 ? b_dim[i] : a_dim[i];
  }
  g.out_shape = batch;
  if (!a_vec) g.out_shape.push_back(g.m);
  if (!b_vec) g.out_shape.push_back(g.n);
  g.nb = product(batch, 0, rank);
  if (g.nb == 0 || g.m == 0 || g.n == 0) return g;
  g.shared_b = product(b_dim, 0, rank) == 1 && product(a_dim, 0, rank) == g.nb;
  g.plain_batch = a_dim == batch && b_dim == batch;
  if (g.shared_b) return g;
  g.a_off.resize(g.nb);
  g.b_off.resize(g.nb);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t j = 0; j < g.nb; ++j) {
    int64_t ao = 0, bo = 0;
    for (size_t d = 0; d < rank; ++d) {
      ao = ao * a_dim[d] + (a_dim[d] == 1 ? 0 : idx[d]);
      bo = bo * b_dim[d] + (b_dim[d] == 1 ? 0 : idx[d]);
    }
    g.a_off[j] = ao * g.m * g.kk;
    g.b_off[j] = bo * g.kk * g.n;
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  return g;
}

// The whole MatMul through oneDNN in `t` (f32 or bf16 operands and result): one call for
// a shared B or a plain batch, one per entry otherwise. False when oneDNN cannot serve it.
bool matmul_dnnl(const MatmulGeom& g, DType t, const void* a, const void* b, void* y) {
  k::DnnlMatmul p;
  p.a_type = p.b_type = p.c_type = t;
  p.m = g.m;
  p.n = g.n;
  p.k = g.kk;
  p.lda = g.kk;
  p.ldb = g.n;
  p.ldc = g.n;
  if (g.shared_b) {
    p.m = g.nb * g.m;
    return k::dnnl_matmul(p, a, b, y);
  }
  if (g.plain_batch) {
    p.batch = g.nb;
    p.stride_a = g.m * g.kk;
    p.stride_b = g.kk * g.n;
    return k::dnnl_matmul(p, a, b, y);
  }
  const size_t bytes = t == DType::kFloat32 ? 4 : 2;
  auto at = [bytes](const void* base, int64_t elems) {
    return static_cast<const char*>(base) + static_cast<size_t>(elems) * bytes;
  };
  for (int64_t j = 0; j < g.nb; ++j) {
    if (!k::dnnl_matmul(p, at(a, g.a_off[j]), at(b, g.b_off[j]),
                        const_cast<char*>(at(y, j * g.m * g.n)))) {
      return false;
    }
  }
  return true;
}

}  // namespace

namespace {

// y (of the geometry's output shape, zero-filled unless kk > 0) = a x b.
template <typename T>
void matmul_into(const MatmulGeom& g, const Tensor& a, const Tensor& b, Tensor& y) {
  if (g.nb == 0 || g.m == 0 || g.n == 0) return;
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  T* yp = y.data<T>();
  if constexpr (std::is_same_v<T, float>) {
    if (g.kk > 0 && matmul_dnnl(g, DType::kFloat32, ap, bp, yp)) return;
  }
  const int64_t m = g.m, n = g.n, kk = g.kk, nb = g.nb;
  if (g.shared_b) {
    mm(nb * m, n, kk, ap, bp, yp);  // one B for all: stack the A matrices
    return;
  }
#pragma omp parallel for if (m * n * kk < kSmallGemm && nb * m * n * kk >= kParallelWork)
  for (int64_t j = 0; j < nb; ++j) mm(m, n, kk, ap + g.a_off[j], bp + g.b_off[j], yp + j * m * n);
}

}  // namespace

template <typename T>
Tensor matmul_of(const OpContext& ctx, const Tensor& a, const Tensor& b) {
  const MatmulGeom g = matmul_geometry(ctx, a, b);
  Tensor y(dtype_of<T>(), g.out_shape);
  matmul_into<T>(g, a, b, y);
  return y;
}
template Tensor matmul_of<float>(const OpContext&, const Tensor&, const Tensor&);
template Tensor matmul_of<double>(const OpContext&, const Tensor&, const Tensor&);

namespace {

void matmul_op(OpContext& ctx) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const Tensor &a = ctx.in(0), &b = ctx.in(1);
    const MatmulGeom g = matmul_geometry(ctx, a, b);
    // Every element is written unless the product is empty (then zeros).
    Tensor& y = g.kk > 0 ? ctx.output_for_overwrite(0, dtype_of<T>(), g.out_shape)
                         : ctx.output(0, dtype_of<T>(), g.out_shape);
    matmul_into<T>(g, a, b, y);
  };
  if (!dispatch<float, double, int32_t, int64_t, uint32_t, uint64_t>(ctx.in(0).dtype(), run)) {
    ctx.unsupported_dtype(0);
  }
}

// A Gemm's product op(A) op(B) of the operands' type t as oneDNN's matmul description.
k::DnnlMatmul gemm_description(const Tensor& a, const Tensor& b, DType t, bool ta, bool tb,
                               int64_t m, int64_t n, int64_t kk) {
  k::DnnlMatmul p;
  p.a_type = p.b_type = p.c_type = t;
  p.trans_a = ta;
  p.trans_b = tb;
  p.m = m;
  p.n = n;
  p.k = kk;
  p.lda = a.dim(1);
  p.ldb = b.dim(1);
  p.ldc = n;
  return p;
}

// Gemm with C one row of N (a linear layer's bias) and alpha = beta = 1, f32 or bf16 (on a CPU
// with bf16 arithmetic): C joins oneDNN's fp32 accumulator as its bias and the result is
// rounded once, the same sum as C copied into Y and added with beta 1, without the copy (a
// serial pass over Y) or the read of Y. False (nothing written) where this does not apply.
bool row_bias_gemm(OpContext& ctx, const Tensor& c, bool ta, bool tb, int64_t m, int64_t n,
                   int64_t kk, float alpha, float beta) {
  const Tensor &a = ctx.in(0), &b = ctx.in(1);
  const DType t = a.dtype();
  if (alpha != 1.0f || beta != 1.0f || kk <= 0 || c.dtype() != t || c.numel() != n ||
      c.rank() > 2 || (c.rank() == 2 && c.dim(0) != 1) ||
      (t == DType::kBFloat16 && !k::dnnl_bf16_native()))
    return false;
  k::DnnlMatmul p = gemm_description(a, b, t, ta, tb, m, n, kk);
  p.bias_type = t;
  p.bias = true;
  // oneDNN writes every element of the placed output, or refuses before writing any (then the
  // caller's path writes it).
  Tensor& y = ctx.output_for_overwrite(0, t, {m, n});
  return k::dnnl_matmul(p, a.raw(), b.raw(), c.raw(), y.raw());
}

template <typename T>
void gemm(OpContext& ctx) {
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  const Tensor* c = ctx.input(2);
  const plan::GemmParams& params = plan::params<plan::GemmParams>(ctx.step());
  const bool ta = params.trans_a(), tb = params.trans_b();
  const float alpha = params.alpha(), beta = params.beta();
  if (a.rank() != 2 || b.rank() != 2) ctx.fail("A and B must be matrices");
  const int64_t m = a.dim(ta ? 1 : 0), kk = a.dim(ta ? 0 : 1);
  const int64_t n = b.dim(tb ? 0 : 1);
  if (b.dim(tb ? 1 : 0) != kk) {
    ctx.fail("inner dimensions of " + a.type_str() + " and " + b.type_str() + " do not match");
  }
  if (c && c->numel() == 0) c = nullptr;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
    if (c && row_bias_gemm(ctx, *c, ta, tb, m, n, kk, alpha, beta)) return;
  }
  // Without C every element is written unless the product is empty (then zeros).
  Tensor& y = c || kk == 0 ? ctx.output(0, a.dtype(), {m, n})
                           : ctx.output_for_overwrite(0, a.dtype(), {m, n});
  T* yp = y.data<T>();
  // C broadcast into y: y[i, j] = C[i * row_step + j * col_step].
  if (c) {
    if (c->rank() > 2) ctx.fail("C of rank " + std::to_string(c->rank()) + " is not allowed");
    const int64_t cm = c->rank() == 2 ? c->dim(0) : 1,
                  cn = c->rank() >= 1 ? c->dim(c->rank() - 1) : 1;
    if ((cm != 1 && cm != m) || (cn != 1 && cn != n)) {
      ctx.fail("C " + c->type_str() + " does not broadcast to [" + std::to_string(m) + "," +
               std::to_string(n) + "]");
    }
    const int64_t row_step = cm == 1 ? 0 : cn, col_step = cn == 1 ? 0 : 1;
    const T* cp = c->data<T>();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) yp[i * n + j] = cp[i * row_step + j * col_step];
    }
  }
  if constexpr (std::is_same_v<T, BFloat16>) {
    k::DnnlMatmul p = gemm_description(a, b, DType::kBFloat16, ta, tb, m, n, kk);
    p.alpha = alpha;
    p.beta = c ? beta : 0.0f;
    if (kk > 0 && !k::dnnl_matmul(p, a.raw(), b.raw(), yp)) {
      ctx.fail("oneDNN cannot run this bf16 Gemm");
    }
    if (kk == 0) {  // y = beta * C, rounded once
      for (int64_t i = 0; i < m * n; ++i) {
        yp[i] = float_to_bf16(c ? beta * bf16_to_float(yp[i]) : 0.0f);
      }
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    k::gemm(ta, tb, m, n, kk, T(alpha), a.data<T>(), a.dim(1), b.data<T>(), b.dim(1),
            c ? T(beta) : T(0), yp, n);
  } else {
    std::vector<T> ab(static_cast<size_t>(m * n));
    k::gemm_naive(ta, tb, m, n, kk, a.data<T>(), a.dim(1), b.data<T>(), b.dim(1), ab.data(), n);
    for (int64_t i = 0; i < m * n; ++i) {
      const double cv = c ? static_cast<double>(beta) * static_cast<double>(yp[i]) : 0.0;
      yp[i] = static_cast<T>(static_cast<double>(alpha) * static_cast<double>(ab[i]) + cv);
    }
  }
}

// bf16 MatMul on a CPU with bf16 arithmetic: oneDNN's bf16 matmul (fp32 accumulation, one
// rounding of the result), no widening. False (nothing done) where it does not apply.
bool low_matmul(OpContext& ctx) {
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  if (a.dtype() != DType::kBFloat16 || b.dtype() != DType::kBFloat16 || !k::dnnl_bf16_native())
    return false;
  const MatmulGeom g = matmul_geometry(ctx, a, b);
  if (g.nb > 0 && g.m > 0 && g.n > 0 && g.kk > 0) {
    // oneDNN writes every element of the placed output, or refuses before writing any.
    Tensor& y = ctx.output_for_overwrite(0, DType::kBFloat16, g.out_shape);
    return matmul_dnnl(g, DType::kBFloat16, a.raw(), b.raw(), y.raw());
  }
  ctx.output(0, DType::kBFloat16, g.out_shape);  // zeros: the result when kk == 0
  return true;
}

// bf16 Gemm (A, B and C, when given, in bf16), as low_matmul: y = C broadcast, then
// alpha * op(A) op(B) + beta * y in fp32, rounded once.
bool low_gemm(OpContext& ctx) {
  const Tensor* c = ctx.input(2);
  if (ctx.in(0).dtype() != DType::kBFloat16 || ctx.in(1).dtype() != DType::kBFloat16 ||
      (c && c->numel() > 0 && c->dtype() != DType::kBFloat16) || !k::dnnl_bf16_native()) {
    return false;
  }
  gemm<BFloat16>(ctx);
  return true;
}

void gemm_op(OpContext& ctx) {
  auto run = [&](auto tag) { gemm<decltype(tag)>(ctx); };
  if (!dispatch<float, double, int32_t, int64_t, uint32_t, uint64_t>(ctx.in(0).dtype(), run)) {
    ctx.unsupported_dtype(0);
  }
}

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  r.add("MatMul", [](OpContext& ctx) {
    if (!low_matmul(ctx)) run_widened(ctx, matmul_op);
  });
  r.add("Gemm", [](OpContext& ctx) {
    if (!low_gemm(ctx)) run_widened(ctx, gemm_op);
  });
}

}  // namespace ampc::rt::cpu::nn
