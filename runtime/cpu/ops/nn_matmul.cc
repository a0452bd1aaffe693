// MatMul (numpy semantics: batched, broadcast batch dimensions, 1-D operands) and Gemm.
#include <type_traits>

#include "kernels/cpu/matmul.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/nn_util.h"

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

}  // namespace

template <typename T>
Tensor matmul_of(const OpContext& ctx, const Tensor& a, const Tensor& b) {
  std::vector<int64_t> as = a.shape(), bs = b.shape();
  if (as.empty() || bs.empty()) ctx.fail("inputs of rank 0 are not allowed");
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  const int64_t m = as[as.size() - 2], kk = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != kk) {
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
  std::vector<int64_t> out_shape = batch;
  if (!a_vec) out_shape.push_back(m);
  if (!b_vec) out_shape.push_back(n);
  Tensor y(dtype_of<T>(), out_shape);
  const int64_t nb = product(batch, 0, rank);
  if (nb == 0 || m == 0 || n == 0) return y;
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  T* yp = y.data<T>();
  if (product(b_dim, 0, rank) == 1 && product(a_dim, 0, rank) == nb) {
    mm(nb * m, n, kk, ap, bp, yp);  // one B for all: stack the A matrices
    return y;
  }
  // Matrix offsets of every batch entry (0 stride along broadcast dimensions).
  std::vector<int64_t> a_off(nb), b_off(nb);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t j = 0; j < nb; ++j) {
    int64_t ao = 0, bo = 0;
    for (size_t d = 0; d < rank; ++d) {
      ao = ao * a_dim[d] + (a_dim[d] == 1 ? 0 : idx[d]);
      bo = bo * b_dim[d] + (b_dim[d] == 1 ? 0 : idx[d]);
    }
    a_off[j] = ao * m * kk;
    b_off[j] = bo * kk * n;
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
#pragma omp parallel for if (m * n * kk < kSmallGemm && nb * m * n * kk >= kParallelWork)
  for (int64_t j = 0; j < nb; ++j) mm(m, n, kk, ap + a_off[j], bp + b_off[j], yp + j * m * n);
  return y;
}
template Tensor matmul_of<float>(const OpContext&, const Tensor&, const Tensor&);
template Tensor matmul_of<double>(const OpContext&, const Tensor&, const Tensor&);

namespace {

void matmul_op(OpContext& ctx) {
  auto run = [&](auto tag) {
    ctx.set_output(0, matmul_of<decltype(tag)>(ctx, ctx.in(0), ctx.in(1)));
  };
  if (!dispatch<float, double, int32_t, int64_t, uint32_t, uint64_t>(ctx.in(0).dtype(), run)) {
    ctx.unsupported_dtype(0);
  }
}

template <typename T>
void gemm(OpContext& ctx) {
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  const Tensor* c = ctx.input(2);
  const bool ta = ctx.attr_int("transA", 0) != 0, tb = ctx.attr_int("transB", 0) != 0;
  const float alpha = ctx.attr_float("alpha", 1.0f), beta = ctx.attr_float("beta", 1.0f);
  if (a.rank() != 2 || b.rank() != 2) ctx.fail("A and B must be matrices");
  const int64_t m = a.dim(ta ? 1 : 0), kk = a.dim(ta ? 0 : 1);
  const int64_t n = b.dim(tb ? 0 : 1);
  if (b.dim(tb ? 1 : 0) != kk) {
    ctx.fail("inner dimensions of " + a.type_str() + " and " + b.type_str() + " do not match");
  }
  Tensor& y = ctx.output(0, a.dtype(), {m, n});
  T* yp = y.data<T>();
  // C broadcast into y: y[i, j] = C[i * row_step + j * col_step].
  if (c && c->numel() > 0) {
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
  } else {
    c = nullptr;
  }
  if constexpr (std::is_floating_point_v<T>) {
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

void gemm_op(OpContext& ctx) {
  auto run = [&](auto tag) { gemm<decltype(tag)>(ctx); };
  if (!dispatch<float, double, int32_t, int64_t, uint32_t, uint64_t>(ctx.in(0).dtype(), run)) {
    ctx.unsupported_dtype(0);
  }
}

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  add_widened(r, "MatMul", matmul_op);
  add_widened(r, "Gemm", gemm_op);
}

}  // namespace ampc::rt::cpu::nn
