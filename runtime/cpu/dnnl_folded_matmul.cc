#include "runtime/cpu/dnnl_folded_matmul.h"

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

}  // namespace

std::unique_ptr<DnnlFoldedMatmul> DnnlFoldedMatmul::make(const plan::Step& step,
                                                         const plan::Plan& plan, const Folding& f) {
  if (step.op() != "MatMul" || !step.domain().empty() || step.inputs_size() < 2 ||
      step.outputs_size() < 1)
    return nullptr;
  bool ok = true;
  const auto as = static_shape(plan, step.inputs(0), &ok);
  const auto bs = static_shape(plan, step.inputs(1), &ok);
  if (!ok || as.size() < 2 || bs.size() < 2) return nullptr;
  const auto t = static_cast<DType>(plan.buffers(step.inputs(0)).dtype());
  if (plan.buffers(step.inputs(1)).dtype() != static_cast<int32_t>(t)) return nullptr;
  if (t != DType::kFloat32 && !(t == DType::kBFloat16 && kernels::cpu::dnnl_bf16_native()))
    return nullptr;
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
  if (p_.bias && (!bias || bias->dtype() != type_ || bias->numel() != p_.n)) return false;
  if (!(y->is_borrowed() && y->dtype() == type_ && y->shape() == out_shape_))
    *y = Tensor(type_, out_shape_);
  return kernels::cpu::dnnl_matmul(p_, a.raw(), b.raw(), p_.bias ? bias->raw() : nullptr, y->raw());
}

}  // namespace ampc::rt::cpu
