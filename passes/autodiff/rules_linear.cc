// Gradients of MatMul (batched, broadcasting, 1-D operands) and Gemm.
#include "passes/autodiff/gradient_registry.h"

namespace ampc::passes::autodiff {
namespace {

using ir::Value;

std::vector<int64_t> matmul_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  // Both at least 2-D here; batch dims broadcast.
  std::vector<int64_t> batch;
  const size_t ra = a.size() - 2, rb = b.size() - 2, r = std::max(ra, rb);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i + ra >= r ? a[i + ra - r] : 1;
    const int64_t db = i + rb >= r ? b[i + rb - r] : 1;
    batch.push_back(std::max(da, db));
  }
  batch.push_back(a[a.size() - 2]);
  batch.push_back(b[b.size() - 1]);
  return batch;
}

// W's gradient when W is one matrix ([K, N], or with only size-1 batch dims) shared by a
// batched A [B..., M, K]: sum_b A_b^T dY_b is A's rows stacked, transposed, times dY's rows
// stacked: one GEMM [K, B*M] x [B*M, N] (the batch folded into K), not B per-sample products
// [B, K, N] summed afterwards (which writes and reads B times W's size, and rounds every
// product in 16 bits before the sum). Null when the shapes are not of that kind.
Value* shared_weight_grad(GradBuilder& b, Value* a2, Value* w2, Value* dy) {
  const auto& sa = *a2->type.shape;
  const auto& sw = *w2->type.shape;
  if (sa.size() <= 2) return nullptr;
  for (size_t i = 0; i + 2 < sw.size(); ++i) {
    if (sw[i] != 1) return nullptr;
  }
  const int64_t k = sa[sa.size() - 1], n = sw[sw.size() - 1];
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < sa.size(); ++i) rows *= sa[i];
  Value* a_rows = b.reshape(a2, {rows, k});
  Value* dy_rows = b.reshape(dy, {rows, n});
  Value* dw = b.op("MatMul", {b.transpose_last(a_rows), dy_rows},
                   {a2->type.dtype, std::vector<int64_t>{k, n}});
  return b.reshape(dw, sw);
}

void matmul(GradContext& c) {
  GradBuilder& b = c.b;
  Value* a = c.input(0);
  Value* w = c.input(1);
  const DType t = a->type.dtype;
  // Promote 1-D operands to matrices the way MatMul does, then undo it at the end.
  auto as2d = [&](Value* v, bool is_left) {
    const auto& s = *v->type.shape;
    if (s.size() >= 2) return v;
    return b.reshape(v, is_left ? std::vector<int64_t>{1, s[0]} : std::vector<int64_t>{s[0], 1});
  };
  Value* a2 = as2d(a, true);
  Value* w2 = as2d(w, false);
  const auto y_shape = matmul_shape(*a2->type.shape, *w2->type.shape);
  Value* dy = b.reshape(c.output_grad(0), y_shape);
  if (c.needs(0)) {
    Value* wt = b.transpose_last(w2);
    Value* da = b.op("MatMul", {dy, wt}, {t, matmul_shape(y_shape, *wt->type.shape)});
    c.set_input_grad(0, b.reshape(b.reduce_to(da, a2->type), *a->type.shape));
  }
  if (c.needs(1)) {
    if (Value* dw = shared_weight_grad(b, a2, w2, dy)) {
      c.set_input_grad(1, b.reshape(dw, *w->type.shape));
      return;
    }
    Value* at = b.transpose_last(a2);
    Value* dw = b.op("MatMul", {at, dy}, {t, matmul_shape(*at->type.shape, y_shape)});
    c.set_input_grad(1, b.reshape(b.reduce_to(dw, w2->type), *w->type.shape));
  }
}

// Y = alpha op(A) op(B) + beta C.
void gemm(GradContext& c) {
  GradBuilder& b = c.b;
  const bool ta = c.attr_int("transA", 0) != 0;
  const bool tb = c.attr_int("transB", 0) != 0;
  const double alpha = c.attr_float("alpha", 1.0f);
  const double beta = c.attr_float("beta", 1.0f);
  Value* dy = c.output_grad(0);
  const DType t = dy->type.dtype;
  auto gemm_op = [&](Value* x, bool tx, Value* y, bool ty, const ir::TensorType& out) {
    return b.op(
        "Gemm", {x, y}, out,
        attrs(ir::Attribute::make_float("alpha", static_cast<float>(alpha)),
              ir::Attribute::make_int("transA", tx), ir::Attribute::make_int("transB", ty)));
  };
  if (c.needs(0)) {  // dA = alpha dY op(B)^T (transposed back when transA)
    Value* da = ta ? gemm_op(c.input(1), tb, dy, true, c.input(0)->type)
                   : gemm_op(dy, false, c.input(1), !tb, c.input(0)->type);
    c.set_input_grad(0, da);
  }
  if (c.needs(1)) {  // dB = alpha op(A)^T dY (transposed back when transB)
    Value* db = tb ? gemm_op(dy, true, c.input(0), ta, c.input(1)->type)
                   : gemm_op(c.input(0), !ta, dy, false, c.input(1)->type);
    c.set_input_grad(1, db);
  }
  if (c.needs(2)) {
    Value* dc = b.reduce_to(dy, c.input(2)->type);
    if (beta != 1.0) dc = b.op("Mul", {dc, b.scalar(beta, t)}, dc->type);
    c.set_input_grad(2, dc);
  }
}

}  // namespace

void register_linear_gradients(GradientRegistry& r) {
  r.add("MatMul", matmul);
  r.add("Gemm", gemm);
}

}  // namespace ampc::passes::autodiff
