// The twin-test harness of the 16-bit CPU emulation (see cpu_half_precision_test_twin.h).
#include "tests/unit/cpu_half_precision_test_twin.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/cpu/dnnl_matmul.h"
#include "kernels/cpu/elementwise_types.h"
#include "lower/legalize.h"
#include "runtime/cpu/op_registry.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::rt::cpu::halftest {
namespace {

namespace kc = kernels::cpu;

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// v rounded once to the 16-bit type, as a double (exact).
double round_to(DType low_type, double v) {
  const float f = static_cast<float>(v);
  return low_type == DType::kFloat16 ? half_to_float(float_to_half(f))
                                     : bf16_to_float(float_to_bf16(f));
}

uint16_t round_bits(DType low_type, float f) {
  return low_type == DType::kFloat16 ? float_to_half(f).bits : float_to_bf16(f).bits;
}

bool is_nan16(DType low_type, uint16_t b) {
  return low_type == DType::kFloat16 ? (b & 0x7c00u) == 0x7c00u && (b & 0x3ffu)
                                     : (b & 0x7f80u) == 0x7f80u && (b & 0x7fu);
}

// The values of argument `a` of case number `index` (random ones depend on both).
std::vector<double> values_of(const Arg& a, DType low_type, uint32_t seed) {
  if (!a.values.empty()) {
    std::vector<double> v = a.values;
    if (a.kind == Arg::kLow)
      for (double& x : v) x = round_to(low_type, x);
    return v;
  }
  std::vector<double> v = optest::pseudo_random(static_cast<size_t>(numel(a.shape)), seed);
  for (double& x : v) {
    x = a.lo + (x + 1) / 2 * (a.hi - a.lo);
    x = a.kind == Arg::kLow ? round_to(low_type, x) : static_cast<float>(x);
  }
  return v;
}

// Whether bf16 bits `got` are one of the two bf16 values around fp32 `ref` (ref itself
// when it is one): the result of the same sums in another fp32 order rounded once, for
// sums whose order differs from the twin's only by fp32 rounding.
bool brackets(uint16_t got, float ref) {
  const float g = bf16_to_float(BFloat16{got});
  if (!std::isfinite(ref) || !std::isfinite(g)) return false;
  const uint32_t r = float_bits(ref);
  const float down = bits_float(r & 0xffff0000u);  // toward zero
  const float up = bits_float((r & 0xffff0000u) + 0x10000u);
  return g == down || g == up;
}

// Ops whose bf16 run is oneDNN's bf16 kernel on a CPU with bf16 arithmetic (fp32
// accumulation in its own order, one rounding), while the fp32 twin accumulates in the fp32
// kernel's order: the two roundings may then differ by one bf16 step where the sum lies
// within the accumulation error of a rounding midpoint.
bool own_accumulation_order(const std::string& op, DType low_type) {
  return low_type == DType::kBFloat16 && kc::dnnl_bf16_native() &&
         (op == "MatMul" || op == "Gemm" || op == "Conv" || op == "ConvGrad");
}

// First index where the low output differs from the reference rounded once (or, with
// `order`, lies outside the bf16 values around it); -1 when none.
int64_t first_low_mismatch(const Tensor& low, const Tensor& ref, DType low_type, bool order) {
  for (int64_t i = 0; i < low.numel(); ++i) {
    const uint16_t got = bits16(low, i);
    const uint16_t want = round_bits(low_type, ref.data<float>()[i]);
    if (got == want || (is_nan16(low_type, got) && is_nan16(low_type, want))) continue;
    if (order && brackets(got, ref.data<float>()[i])) continue;
    return i;
  }
  return -1;
}

}  // namespace

Arg low(std::vector<int64_t> shape, double lo, double hi) {
  return {Arg::kLow, std::move(shape), {}, lo, hi};
}
Arg low_values(std::vector<int64_t> shape, std::vector<double> v) {
  return {Arg::kLow, std::move(shape), std::move(v)};
}
Arg f32(std::vector<int64_t> shape, double lo, double hi) {
  return {Arg::kFloat, std::move(shape), {}, lo, hi};
}
Arg i64(std::vector<int64_t> shape, std::vector<double> v) {
  return {Arg::kInt64, std::move(shape), std::move(v)};
}
Arg boolean(std::vector<int64_t> shape, std::vector<double> v) {
  return {Arg::kBool, std::move(shape), std::move(v)};
}
Arg absent() {
  return {};
}

Tensor tensor_of(DType dtype, const std::vector<int64_t>& shape, const std::vector<double>& v) {
  Tensor t(dtype, shape);
  EXPECT_EQ(static_cast<int64_t>(v.size()), t.numel()) << "values for " << t.type_str();
  const auto fill = [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < v.size() && static_cast<int64_t>(i) < t.numel(); ++i)
      t.data<T>()[i] = kc::store<T>(v[i]);
  };
  if (!kc::visit_dtype<kc::kFloats | kc::kBoolType>(dtype, fill)) {
    EXPECT_EQ(dtype, DType::kInt64);
    for (size_t i = 0; i < v.size() && static_cast<int64_t>(i) < t.numel(); ++i)
      t.data<int64_t>()[i] = static_cast<int64_t>(v[i]);
  }
  return t;
}

uint16_t bits16(const Tensor& t, int64_t i) {
  uint16_t b;
  std::memcpy(&b, static_cast<const char*>(t.raw()) + 2 * i, 2);
  return b;
}

plan::Attribute attr_floats(const std::string& name, const std::vector<float>& v) {
  plan::Attribute a;
  a.set_name(name);
  for (float x : v) a.mutable_floats()->add_v(x);
  return a;
}

std::vector<Tensor> run_op(const std::string& op, const std::string& domain,
                           const std::vector<Tensor>& inputs,
                           const std::vector<plan::Attribute>& attrs, int outputs, int64_t opset) {
  plan::Step step;
  step.set_op(op);
  step.set_domain(domain);
  step.set_opset_version(opset);
  step.add_source_nodes("twin");
  for (const auto& a : attrs) *step.add_attributes() = a;
  std::vector<const Tensor*> in;
  for (const auto& t : inputs) in.push_back(t.defined() ? &t : nullptr);
  lower::legalize_for_tensors(step, in, outputs);  // as plan emission does
  std::vector<Tensor> out(outputs);
  std::vector<Tensor*> out_ptrs;
  for (auto& t : out) out_ptrs.push_back(&t);
  const CpuOp* fn = OpRegistry::instance().find(op, domain);
  if (!fn) throw Error("no CPU kernel for " + op);
  OpContext ctx(step, in, out_ptrs);
  (*fn)(ctx);
  return out;
}

void expect_twin(const Case& c, DType low_type) {
  SCOPED_TRACE(c.op + " in " + std::string(dtype_name(low_type)));
  std::vector<Tensor> low_in, ref_in;
  for (size_t i = 0; i < c.args.size(); ++i) {
    const Arg& a = c.args[i];
    if (a.kind == Arg::kAbsent) {
      low_in.emplace_back();
      ref_in.emplace_back();
      continue;
    }
    const auto v = values_of(a, low_type, static_cast<uint32_t>(i * 7919 + c.op.size()));
    const DType low_dt = a.kind == Arg::kLow     ? low_type
                         : a.kind == Arg::kFloat ? DType::kFloat32
                         : a.kind == Arg::kInt64 ? DType::kInt64
                                                 : DType::kBool;
    const DType ref_dt = a.kind == Arg::kLow ? DType::kFloat32 : low_dt;
    low_in.push_back(tensor_of(low_dt, a.shape, v));
    ref_in.push_back(tensor_of(ref_dt, a.shape, v));
  }
  std::vector<Tensor> low_out, ref_out;
  try {
    low_out = run_op(c.op, c.domain, low_in, c.attrs, c.outputs, c.opset);
    ref_out = run_op(c.op, c.domain, ref_in, c.attrs, c.outputs, c.opset);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
    return;
  }
  for (int i = 0; i < c.outputs; ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    const Tensor &lo = low_out[i], &ref = ref_out[i];
    ASSERT_EQ(lo.defined(), ref.defined());
    if (!lo.defined()) continue;
    ASSERT_EQ(lo.shape(), ref.shape());
    if (lo.dtype() == low_type) {
      ASSERT_EQ(ref.dtype(), DType::kFloat32);
      const int64_t bad =
          first_low_mismatch(lo, ref, low_type, own_accumulation_order(c.op, low_type));
      EXPECT_EQ(bad, -1) << "element " << bad << ": got bits " << bits16(lo, bad < 0 ? 0 : bad)
                         << ", fp32 twin " << (bad < 0 ? 0.0f : ref.data<float>()[bad]);
    } else {
      ASSERT_EQ(lo.dtype(), ref.dtype()) << "a non-16-bit output changed type";
      EXPECT_EQ(std::memcmp(lo.raw(), ref.raw(), lo.nbytes()), 0) << "not byte-identical";
    }
  }
}

void expect_twin(const Case& c) {
  expect_twin(c, DType::kFloat16);
  expect_twin(c, DType::kBFloat16);
}

}  // namespace ampc::rt::cpu::halftest
