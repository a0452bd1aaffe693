#include "runtime/cpu/dnnl_folded_matmul.h"

#include <algorithm>
#include <functional>
#include <numeric>

namespace ampc::rt::cpu {
namespace {

std::vector<int64_t> static_shape(const plan::Plan& plan, int id, bool* ok) {
  if (id < 0 || id >= plan.buffers_size() || !plan.buffers(id).shape_known()) {
    *ok = false;
    return {};
  }
  const auto& s = plan.buffers(id).shape();
  return {s.begin(), s.end()};
}

int64_t product(const std::vector<int64_t>& v, size_t end) {
  return std::accumulate(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(end), int64_t{1},
                         std::multiplies<>());
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * shape[i];
  return st;
}

bool is_permutation(const std::vector<int64_t>& perm, size_t rank) {
  if (perm.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)]) return false;
    seen[static_cast<size_t>(p)] = true;
  }
  return true;
}

// A stored (contiguous) operand as the call reads it: through `perm` (output axis i is the
// input's axis perm[i]), then with the last two axes swapped when `trans`.
bool operand_view(const std::vector<int64_t>& shape, const std::vector<int64_t>& perm, bool trans,
                  kernels::cpu::DnnlStridedMatmul::Layout* view) {
  const std::vector<int64_t> st = contiguous_strides(shape);
  view->dims = shape;
  view->strides = st;
  if (!perm.empty()) {
    if (!is_permutation(perm, shape.size())) return false;
    for (size_t i = 0; i < perm.size(); ++i) {
      view->dims[i] = shape[static_cast<size_t>(perm[i])];
      view->strides[i] = st[static_cast<size_t>(perm[i])];
    }
  }
  if (trans) {
    std::swap(view->dims[shape.size() - 1], view->dims[shape.size() - 2]);
    std::swap(view->strides[shape.size() - 1], view->strides[shape.size() - 2]);
  }
  return true;
}

// Leading batch dimensions of 1 up to `rank` (numpy's right alignment).
void pad_rank(kernels::cpu::DnnlStridedMatmul::Layout* l, size_t rank) {
  const size_t add = rank - l->dims.size();
  const int64_t outer = l->dims[0] * l->strides[0];
  l->dims.insert(l->dims.begin(), add, 1);
  l->strides.insert(l->strides.begin(), add, outer);
}

}  // namespace

std::unique_ptr<DnnlFoldedMatmul> DnnlFoldedMatmul::make_strided(const plan::Step& step,
                                                                 const plan::Plan& plan,
                                                                 const Folding& f) {
  bool ok = true;
  const auto as = static_shape(plan, step.inputs(0), &ok);
  const auto bs = static_shape(plan, step.inputs(1), &ok);
  if (!ok || as.size() < 2 || bs.size() < 2) return nullptr;
  auto r = std::make_unique<DnnlFoldedMatmul>();
  kernels::cpu::DnnlStridedMatmul& p = r->s_;
  p.type = static_cast<DType>(plan.buffers(step.inputs(0)).dtype());
  if (!operand_view(as, f.perm_a, f.trans_a, &p.a) || !operand_view(bs, f.perm_b, f.trans_b, &p.b))
    return nullptr;
  const size_t rank = std::max(as.size(), bs.size());
  pad_rank(&p.a, rank);
  pad_rank(&p.b, rank);
  const int64_t m = p.a.dims[rank - 2], k = p.a.dims[rank - 1], n = p.b.dims[rank - 1];
  if (p.b.dims[rank - 2] != k || m <= 0 || n <= 0 || k <= 0) return nullptr;
  // The result: batch dimensions broadcast, [m, n] last; stored through perm_y.
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i + 2 < rank; ++i) {
    const int64_t da = p.a.dims[i], db = p.b.dims[i];
    if (da != db && da != 1 && db != 1) return nullptr;
    out[i] = da == 1 ? db : da;
    if (out[i] <= 0) return nullptr;
  }
  out[rank - 2] = m;
  out[rank - 1] = n;
  p.c.dims = out;
  p.c.strides = contiguous_strides(out);
  std::vector<int64_t> stored = out;
  if (!f.perm_y.empty()) {
    if (!is_permutation(f.perm_y, rank)) return nullptr;
    for (size_t i = 0; i < rank; ++i) stored[i] = out[static_cast<size_t>(f.perm_y[i])];
    const std::vector<int64_t> st = contiguous_strides(stored);
    for (size_t i = 0; i < rank; ++i) p.c.strides[static_cast<size_t>(f.perm_y[i])] = st[i];
  }
  if (f.bias) {
    const auto cs = static_shape(plan, step.inputs(2), &ok);
    if (!ok || plan.buffers(step.inputs(2)).dtype() != static_cast<int32_t>(p.type) ||
        product(cs, cs.size()) != n || (!cs.empty() && cs.back() != n))
      return nullptr;
    p.bias = true;
    p.bias_type = p.type;
  }
  p.relu = f.relu;
  // A result stored with its columns contiguous: C^T = B^T A^T, whose rows are (the bias
  // would run along the other axis there).
  if (p.c.strides[rank - 1] != 1 && p.c.strides[rank - 2] == 1 && !p.bias) {
    auto swap_last_two = [rank](kernels::cpu::DnnlStridedMatmul::Layout& l) {
      std::swap(l.dims[rank - 1], l.dims[rank - 2]);
      std::swap(l.strides[rank - 1], l.strides[rank - 2]);
    };
    std::swap(p.a, p.b);
    swap_last_two(p.a);
    swap_last_two(p.b);
    swap_last_two(p.c);
    r->swapped_ = true;
  }
  if (!kernels::cpu::dnnl_strided_matmul_prepare(p)) return nullptr;
  r->strided_ = true;
  r->type_ = p.type;
  r->a_shape_ = as;
  r->b_shape_ = bs;
  r->out_shape_ = std::move(stored);
  return r;
}

std::unique_ptr<DnnlFoldedMatmul> DnnlFoldedMatmul::make(const plan::Step& step,
                                                         const plan::Plan& plan, const Folding& f) {
  const bool gemm = step.op() == "Gemm";
  if ((step.op() != "MatMul" && !gemm) || !step.domain().empty() || step.inputs_size() < 2 ||
      step.outputs_size() < 1)
    return nullptr;
  bool ok = true;
  const auto as = static_shape(plan, step.inputs(0), &ok);
  const auto bs = static_shape(plan, step.inputs(1), &ok);
  if (!ok || as.size() < 2 || bs.size() < 2) return nullptr;
  // A Gemm: matrices, its C (when a bias) added as it is, nothing scaled.
  if (gemm && (as.size() != 2 || bs.size() != 2 || !step.has_gemm() || step.gemm().alpha() != 1 ||
               (f.bias && step.gemm().beta() != 1)))
    return nullptr;
  const auto t = static_cast<DType>(plan.buffers(step.inputs(0)).dtype());
  if (plan.buffers(step.inputs(1)).dtype() != static_cast<int32_t>(t)) return nullptr;
  if (t != DType::kFloat32 && !(t == DType::kBFloat16 && kernels::cpu::dnnl_bf16_native()))
    return nullptr;
  if (!f.perm_a.empty() || !f.perm_b.empty() || !f.perm_y.empty())
    return make_strided(step, plan, f);
  auto r = std::make_unique<DnnlFoldedMatmul>();
  kernels::cpu::DnnlMatmul& p = r->p_;
  p.a_type = p.b_type = p.c_type = t;
  p.trans_a = f.trans_a;
  p.trans_b = f.trans_b;
  const size_t ra = as.size() - 2, rb = bs.size() - 2;
  const int64_t m = f.trans_a ? as[ra + 1] : as[ra], k = f.trans_a ? as[ra] : as[ra + 1];
  const int64_t kb = f.trans_b ? bs[rb + 1] : bs[rb], n = f.trans_b ? bs[rb] : bs[rb + 1];
  if (k != kb || m <= 0 || n <= 0 || k <= 0) return nullptr;
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = as[ra + 1];
  p.ldb = bs[rb + 1];
  p.ldc = n;
  const std::vector<int64_t> batch_a(as.begin(), as.begin() + static_cast<std::ptrdiff_t>(ra));
  const std::vector<int64_t> batch_b(bs.begin(), bs.begin() + static_cast<std::ptrdiff_t>(rb));
  const int64_t nb_a = product(as, ra), nb_b = product(bs, rb);
  std::vector<int64_t> out = batch_a.size() >= batch_b.size() ? batch_a : batch_b;
  if (rb == 0 && !f.trans_a) {
    p.m = nb_a * m;  // one B for all: the A matrices stacked
  } else if (rb == 0) {
    p.batch = nb_a;
    p.stride_a = m * k;
  } else if (ra == 0) {
    p.batch = nb_b;
    p.stride_b = k * n;
  } else if (batch_a == batch_b) {
    p.batch = nb_a;
    p.stride_a = m * k;
    p.stride_b = k * n;
  } else {
    return nullptr;
  }
  if (f.bias) {
    const auto cs = static_shape(plan, step.inputs(2), &ok);
    if (!ok || plan.buffers(step.inputs(2)).dtype() != static_cast<int32_t>(t) ||
        product(cs, cs.size()) != n || (!cs.empty() && cs.back() != n))
      return nullptr;
    p.bias = true;
    p.bias_type = t;
  }
  p.relu = f.relu;
  out.push_back(m);
  out.push_back(n);
  if (!kernels::cpu::dnnl_matmul_prepare(p)) return nullptr;
  r->type_ = t;
  r->a_shape_ = as;
  r->b_shape_ = bs;
  r->out_shape_ = std::move(out);
  return r;
}

bool DnnlFoldedMatmul::run(const Tensor& a, const Tensor& b, const Tensor* bias, Tensor* y) const {
  if (a.shape() != a_shape_ || b.shape() != b_shape_ || a.dtype() != type_ || b.dtype() != type_)
    return false;
  const bool with_bias = strided_ ? s_.bias : p_.bias;
  const int64_t n = strided_ ? s_.c.dims.back() : p_.n;
  if (with_bias && (!bias || bias->dtype() != type_ || bias->numel() != n)) return false;
  if (!(y->is_borrowed() && y->dtype() == type_ && y->shape() == out_shape_))
    *y = Tensor(type_, out_shape_);
  const void* bias_data = with_bias ? bias->raw() : nullptr;
  if (strided_) {
    const void* first = swapped_ ? b.raw() : a.raw();
    const void* second = swapped_ ? a.raw() : b.raw();
    return kernels::cpu::dnnl_strided_matmul(s_, first, second, bias_data, y->raw());
  }
  return kernels::cpu::dnnl_matmul(p_, a.raw(), b.raw(), bias_data, y->raw());
}

}  // namespace ampc::rt::cpu
