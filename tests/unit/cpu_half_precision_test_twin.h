// Twin tests of the CPU backend's fp16/bf16 emulation (amp-semantics.md section 1): an op run
// on 16-bit inputs must give, bit for bit, what the same op gives on the fp32 upcast of those
// inputs, rounded once (round-to-nearest-even) to the 16-bit type. Outputs that are not
// 16-bit (bool masks, int64 indices, fp32 statistics) must be byte-identical. One exception:
// bf16 MatMul, Gemm, Conv and ConvGrad on a CPU with bf16 arithmetic run oneDNN's bf16 kernels,
// which sum in their own fp32 order, so there either bf16 neighbour of the twin is accepted
// (tests/unit/dnnl_numerics_test.cc bounds them against a double oracle).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::rt::cpu::halftest {

// One input of a twin case.
struct Arg {
  enum Kind {
    kLow,     // float: 16-bit in the low run, fp32 in the reference run
    kFloat,   // fp32 in both runs (BatchNormalization's T1/T2, Dropout's ratio)
    kInt64,   // indices, shapes, axes
    kBool,    // conditions, training_mode
    kAbsent,  // an omitted optional input
  };
  Arg() = default;
  Arg(Kind k, std::vector<int64_t> s, std::vector<double> v, double l = -2, double h = 2)
      : kind(k), shape(std::move(s)), values(std::move(v)), lo(l), hi(h) {}

  Kind kind = kAbsent;
  std::vector<int64_t> shape;
  std::vector<double> values;  // given values; empty: random in [lo, hi)
  double lo = -2, hi = 2;
};

// Random 16-bit-representable values in [lo, hi) (kLow) or fp32 values (kFloat).
Arg low(std::vector<int64_t> shape, double lo = -2, double hi = 2);
Arg low_values(std::vector<int64_t> shape, std::vector<double> v);
Arg f32(std::vector<int64_t> shape, double lo = -2, double hi = 2);
Arg i64(std::vector<int64_t> shape, std::vector<double> v);
Arg boolean(std::vector<int64_t> shape, std::vector<double> v);
Arg absent();

struct Case {
  Case(std::string o, std::vector<Arg> a, std::vector<plan::Attribute> at = {}, int outs = 1,
       int64_t set = 17, std::string dom = "")
      : op(std::move(o)),
        args(std::move(a)),
        attrs(std::move(at)),
        outputs(outs),
        opset(set),
        domain(std::move(dom)) {}

  std::string op;
  std::vector<Arg> args;
  std::vector<plan::Attribute> attrs;
  int outputs = 1;
  int64_t opset = 17;
  std::string domain;  // "ampc" for the gradient ops
};

// Runs `c` in fp16 and in bf16 against its fp32 twin; reports mismatches as test failures.
void expect_twin(const Case& c);
// The same for one low dtype.
void expect_twin(const Case& c, DType low_type);

// Runs one op through the registry (any domain); throws ampc::Error as the op does.
std::vector<Tensor> run_op(const std::string& op, const std::string& domain,
                           const std::vector<Tensor>& inputs,
                           const std::vector<plan::Attribute>& attrs, int outputs, int64_t opset);

// A tensor of any float dtype (values rounded once), int64 or bool from doubles.
Tensor tensor_of(DType dtype, const std::vector<int64_t>& shape, const std::vector<double>& v);
// The raw bits of element i of an fp16 or bf16 tensor.
uint16_t bits16(const Tensor& t, int64_t i);

plan::Attribute attr_floats(const std::string& name, const std::vector<float>& v);

}  // namespace ampc::rt::cpu::halftest
