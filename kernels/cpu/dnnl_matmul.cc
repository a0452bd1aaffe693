#include "kernels/cpu/dnnl_matmul.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/dnnl_context.h"

namespace ampc::kernels::cpu {
namespace {

namespace ds = dnnl_support;
using dnnl::memory;

std::string key_of(const DnnlMatmul& p) {
  std::string k = "matmul";
  for (int64_t v : {int64_t(p.a_type), int64_t(p.b_type), int64_t(p.c_type), int64_t(p.trans_a),
                    int64_t(p.trans_b), p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.batch, p.stride_a,
                    p.stride_b, int64_t(p.bias), int64_t(p.bias_type), int64_t(p.relu)}) {
    k += ',' + std::to_string(v);
  }
  // alpha and beta by their bits: std::to_string keeps 6 decimals, so alphas such as 1/60000
  // and 1/65536 made one key and the second GEMM ran with the first one's output scale.
  for (float v : {p.alpha, p.beta}) k += ',' + std::to_string(std::bit_cast<uint32_t>(v));
  return k;
}

// A [rows, cols] operand stored row-major with leading dimension ld (transposed when trans),
// batched with `stride` (0: one matrix for every batch entry, a broadcast batch dimension).
memory::desc operand(memory::data_type t, bool trans, int64_t rows, int64_t cols, int64_t ld,
                     int64_t batch, int64_t stride) {
  const memory::dim rs = trans ? 1 : ld, cs = trans ? ld : 1;
  if (batch == 1) return memory::desc({rows, cols}, t, {rs, cs});
  if (stride == 0) return memory::desc({1, rows, cols}, t, {(trans ? cols : rows) * ld, rs, cs});
  return memory::desc({batch, rows, cols}, t, {stride, rs, cs});
}

std::unique_ptr<ds::Prepared> make(const DnnlMatmul& p) {
  memory::data_type ta, tb, tc;
  if (!ds::dnnl_type(p.a_type, &ta) || !ds::dnnl_type(p.b_type, &tb) ||
      !ds::dnnl_type(p.c_type, &tc)) {
    return nullptr;
  }
  const memory::desc a = operand(ta, p.trans_a, p.m, p.k, p.lda, p.batch, p.stride_a);
  const memory::desc b = operand(tb, p.trans_b, p.k, p.n, p.ldb, p.batch, p.stride_b);
  const memory::desc c = operand(tc, false, p.m, p.n, p.ldc, p.batch, p.m * p.ldc);
  memory::data_type tbias = memory::data_type::f32;
  if (p.bias && !ds::dnnl_type(p.bias_type, &tbias)) return nullptr;
  const memory::desc bias = p.batch == 1 ? memory::desc({1, p.n}, tbias, {p.n, 1})
                                         : memory::desc({1, 1, p.n}, tbias, {p.n, p.n, 1});
  dnnl::primitive_attr attr = ds::user_scratchpad_attr();
  if (p.alpha != 1.0f) attr.set_output_scales(0, {p.alpha});
  dnnl::post_ops ops;
  if (p.beta != 0.0f) ops.append_sum(p.beta);
  if (p.relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (ops.len() > 0) attr.set_post_ops(ops);
  const auto desc = p.bias ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c);
  const dnnl::matmul::primitive_desc pd(desc, attr, ds::engine());
  std::vector<ds::ArgSpec> args = {{DNNL_ARG_SRC, a, false}, {DNNL_ARG_WEIGHTS, b, false}};
  if (p.bias) args.push_back({DNNL_ARG_BIAS, bias, false});
  args.push_back({DNNL_ARG_DST, c, true});
  auto prepared = ds::prepare(pd, dnnl::matmul(pd), args);
  // The sum post-op reads C where the primitive writes it: only without a reorder of C.
  if (p.beta != 0.0f && prepared->args.back().reorder) return nullptr;
  return prepared;
}

// Small products run on the calling thread (dnnl_context.h's kSerialMultiplyAdds).
bool serial(const DnnlMatmul& p) {
  return static_cast<double>(p.m) * p.n * p.k * p.batch < ds::kSerialMultiplyAdds;
}

std::string key_of(const DnnlStridedMatmul& p) {
  std::string k = "strided_matmul," + std::to_string(int(p.type)) + ',' +
                  std::to_string(int(p.bias)) + ',' + std::to_string(int(p.bias_type)) + ',' +
                  std::to_string(int(p.relu));
  for (const auto* l : {&p.a, &p.b, &p.c}) {
    for (const auto* v : {&l->dims, &l->strides}) {
      k += ';';
      for (int64_t x : *v) k += std::to_string(x) + ',';
    }
  }
  return k;
}

bool valid(const DnnlStridedMatmul& p) {
  const size_t r = p.c.dims.size();
  for (const auto* l : {&p.a, &p.b, &p.c}) {
    if (l->dims.size() != r || l->strides.size() != r) return false;
  }
  return r >= 2 && r <= DNNL_MAX_NDIMS;
}

// The strides of a view with each size-1 axis's stride (which addresses nothing) set to what
// a dense layout in the order of the other axes would give it. oneDNN 2.6 reads a size-1 axis
// of stride 1 before an axis of stride 1 as a transposed layout ("abdc") and picks its
// gemm:jit kernel, whose execution then fails (a [2, 4, 1, 6] product written to strides
// 24, 6, 1, 1: the transposed view of a Resize's interpolation MatMul).
memory::dims canonical_strides(const memory::dims& dims, memory::dims strides) {
  for (size_t i = dims.size(); i-- > 0;) {
    if (dims[i] != 1) continue;
    memory::dim inner = 1;
    for (size_t j = i + 1; j < dims.size(); ++j) inner = std::max(inner, strides[j] * dims[j]);
    strides[i] = inner;
  }
  return strides;
}

std::unique_ptr<ds::Prepared> make(const DnnlStridedMatmul& p) {
  memory::data_type t, tbias = memory::data_type::f32;
  if (!valid(p) || !ds::dnnl_type(p.type, &t)) return nullptr;
  if (p.bias && !ds::dnnl_type(p.bias_type, &tbias)) return nullptr;
  const memory::desc a(p.a.dims, t, canonical_strides(p.a.dims, p.a.strides)),
      b(p.b.dims, t, canonical_strides(p.b.dims, p.b.strides)),
      c(p.c.dims, t, canonical_strides(p.c.dims, p.c.strides));
  memory::dims bias_dims(p.c.dims.size(), 1), bias_strides(p.c.dims.size(), p.c.dims.back());
  bias_dims.back() = p.c.dims.back();
  bias_strides.back() = 1;
  const memory::desc bias(bias_dims, tbias, bias_strides);
  dnnl::primitive_attr attr = ds::user_scratchpad_attr();
  if (p.relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  const auto desc = p.bias ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c);
  const dnnl::matmul::primitive_desc pd(desc, attr, ds::engine());
  // The reference implementation serves any strides, tens of times slower than a transpose
  // and the fast kernels: then the caller transposes.
  if (std::string(pd.impl_info_str()).find("ref") != std::string::npos) return nullptr;
  std::vector<ds::ArgSpec> args = {{DNNL_ARG_SRC, a, false}, {DNNL_ARG_WEIGHTS, b, false}};
  if (p.bias) args.push_back({DNNL_ARG_BIAS, bias, false});
  args.push_back({DNNL_ARG_DST, c, true});
  return ds::prepare(pd, dnnl::matmul(pd), args);
}

bool serial(const DnnlStridedMatmul& p) {
  double madds = static_cast<double>(p.a.dims.back());  // k
  for (int64_t d : p.c.dims) madds *= static_cast<double>(d);
  return madds < ds::kSerialMultiplyAdds;
}

// Runs a prepared matmul (false when there is none: oneDNN cannot serve the problem); the
// bias operand only where the primitive has one.
bool run(const ds::Prepared* prepared, const void* a, const void* b, const void* bias, void* c) {
  if (!prepared) return false;
  if (bias) {
    ds::execute(*prepared, {a, b, bias, c});
  } else {
    ds::execute(*prepared, {a, b, c});
  }
  return true;
}

const ds::Prepared* find_or_make(const DnnlStridedMatmul& p) {
  return ds::find_or_make(
      key_of(p), [&] { return make(p); }, serial(p));
}

}  // namespace

bool dnnl_bf16_native() {
  static const bool native = [] {
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
  }();
  return native;
}

bool dnnl_matmul(const DnnlMatmul& p, const void* a, const void* b, void* c) {
  if (p.bias) return false;  // the bias operand is missing
  return dnnl_matmul(p, a, b, nullptr, c);
}

bool dnnl_matmul(const DnnlMatmul& p, const void* a, const void* b, const void* bias, void* c) {
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return true;  // nothing to compute
  if (p.k <= 0) return false;                             // C = beta * C: the caller's loop does it
  return run(ds::find_or_make(
                 key_of(p), [&] { return make(p); }, serial(p)),
             a, b, p.bias ? bias : nullptr, c);
}

bool dnnl_strided_matmul(const DnnlStridedMatmul& p, const void* a, const void* b, const void* bias,
                         void* c) {
  if (p.bias && !bias) return false;
  return run(find_or_make(p), a, b, p.bias ? bias : nullptr, c);
}

bool dnnl_strided_matmul_prepare(const DnnlStridedMatmul& p) {
  return find_or_make(p) != nullptr;
}

bool dnnl_matmul_prepare(const DnnlMatmul& p) {
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return true;
  if (p.k <= 0) return false;
  return ds::find_or_make(
             key_of(p), [&] { return make(p); }, serial(p)) != nullptr;
}

}  // namespace ampc::kernels::cpu
