// Step/tensor helpers of the CPU operator tests (see op_test_helpers.h).
#include "tests/unit/op_test_helpers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "lower/legalize.h"
#include "runtime/cpu/op_registry.h"

namespace ampc::rt::cpu::optest {

plan::Attribute attr_i(const std::string& name, int64_t v) {
  plan::Attribute a;
  a.set_name(name);
  a.set_i(v);
  return a;
}
plan::Attribute attr_f(const std::string& name, float v) {
  plan::Attribute a;
  a.set_name(name);
  a.set_f(v);
  return a;
}
plan::Attribute attr_s(const std::string& name, const std::string& v) {
  plan::Attribute a;
  a.set_name(name);
  a.set_s(v);
  return a;
}
plan::Attribute attr_ints(const std::string& name, const std::vector<int64_t>& v) {
  plan::Attribute a;
  a.set_name(name);
  for (int64_t x : v) a.mutable_ints()->add_v(x);
  return a;
}

Tensor make(DType dtype, const std::vector<int64_t>& shape, const std::vector<double>& v) {
  Tensor t(dtype, shape);
  EXPECT_EQ(static_cast<int64_t>(v.size()), t.numel()) << "values for " << t.type_str();
  for (size_t i = 0; i < v.size() && static_cast<int64_t>(i) < t.numel(); ++i) {
    switch (dtype) {
      case DType::kFloat32:
        t.data<float>()[i] = static_cast<float>(v[i]);
        break;
      case DType::kFloat64:
        t.data<double>()[i] = v[i];
        break;
      case DType::kFloat16:
        t.data<Half>()[i] = float_to_half(static_cast<float>(v[i]));
        break;
      case DType::kBFloat16:
        t.data<BFloat16>()[i] = float_to_bf16(static_cast<float>(v[i]));
        break;
      case DType::kInt64:
        t.data<int64_t>()[i] = static_cast<int64_t>(v[i]);
        break;
      case DType::kInt32:
        t.data<int32_t>()[i] = static_cast<int32_t>(v[i]);
        break;
      case DType::kUInt8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(v[i]);
        break;
      case DType::kInt8:
        t.data<int8_t>()[i] = static_cast<int8_t>(v[i]);
        break;
      default:
        ADD_FAILURE() << "make: unhandled dtype";
    }
  }
  return t;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype()) {
      case DType::kFloat32:
        v[i] = t.data<float>()[i];
        break;
      case DType::kFloat64:
        v[i] = t.data<double>()[i];
        break;
      case DType::kFloat16:
        v[i] = half_to_float(t.data<Half>()[i]);
        break;
      case DType::kBFloat16:
        v[i] = bf16_to_float(t.data<BFloat16>()[i]);
        break;
      case DType::kInt64:
        v[i] = static_cast<double>(t.data<int64_t>()[i]);
        break;
      case DType::kInt32:
        v[i] = t.data<int32_t>()[i];
        break;
      case DType::kUInt8:
        v[i] = t.data<uint8_t>()[i];
        break;
      case DType::kInt8:
        v[i] = t.data<int8_t>()[i];
        break;
      default:
        ADD_FAILURE() << "values: unhandled dtype";
    }
  }
  return v;
}

std::vector<Tensor> run(const std::string& op, const std::vector<Tensor>& inputs,
                        const std::vector<plan::Attribute>& attrs, int num_outputs, int64_t opset,
                        const std::string& domain) {
  plan::Step step;
  step.set_op(op);
  step.set_domain(domain);
  step.set_opset_version(opset);
  step.add_source_nodes("test_node");
  for (const auto& a : attrs) *step.add_attributes() = a;
  std::vector<const Tensor*> in;
  for (const auto& t : inputs) in.push_back(t.defined() ? &t : nullptr);
  lower::legalize_for_tensors(step, in, num_outputs);  // as plan emission does
  std::vector<Tensor> out(num_outputs);
  std::vector<Tensor*> out_ptrs;
  for (auto& t : out) out_ptrs.push_back(&t);
  const CpuOp* fn = OpRegistry::instance().find(op, domain);
  if (!fn) throw Error("no CPU kernel for " + (domain.empty() ? "" : domain + ".") + op);
  OpContext ctx(step, in, out_ptrs);
  (*fn)(ctx);
  return out;
}

std::string run_error(const std::string& op, const std::vector<Tensor>& inputs,
                      const std::vector<plan::Attribute>& attrs, int num_outputs, int64_t opset,
                      const std::string& domain) {
  try {
    run(op, inputs, attrs, num_outputs, opset, domain);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<double> pseudo_random(size_t n, uint32_t seed) {
  std::vector<double> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<double>(s >> 8) / static_cast<double>(1u << 24) * 2.0 - 1.0;
  }
  return v;
}

int64_t count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Tensor uniform(DType t, const std::vector<int64_t>& shape, uint32_t seed, double lo, double hi) {
  std::vector<double> v = pseudo_random(static_cast<size_t>(count(shape)), seed);
  for (double& x : v) x = lo + (x + 1) / 2 * (hi - lo);
  return make(t, shape, v);
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::abs(want[i]))) << "element " << i;
  }
}

}  // namespace ampc::rt::cpu::optest
