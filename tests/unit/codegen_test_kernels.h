// KernelDef builders shared by the code generator's tests (codegen_host_test, codegen_ptx_test):
// a small assembler for kernel bodies and the instruction set by category.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/codegen/kernel.pb.h"

namespace ampc::kernels::codegen::cgtest {

// ONNX dtype codes.
constexpr int kF32 = 1, kBool = 9, kF16 = 10, kF64 = 11, kBF16 = 16;
inline const std::vector<int> kFloatTypes = {kF16, kBF16, kF32, kF64};
inline const std::vector<int> kAllTypes = {kF16, kBF16, kF32, kF64, kBool};

inline const std::vector<std::string> kUnaryOps = {
    "neg",  "abs",   "sqrt", "exp",   "log",  "reciprocal", "tanh",  "erf",   "sigmoid",
    "relu", "floor", "ceil", "round", "sign", "expm1",      "log1p", "sin",   "cos",
    "tan",  "asin",  "acos", "atan",  "sinh", "cosh",       "asinh", "acosh", "atanh"};
inline const std::vector<std::string> kBinaryOps = {"add", "sub", "mul", "div",
                                                    "max", "min", "pow"};
inline const std::vector<std::string> kCompareOps = {"equal", "less", "less_equal", "greater",
                                                     "greater_equal"};
inline const std::vector<std::string> kLogicOps = {"and", "or", "xor"};

class KernelBuilder {
 public:
  explicit KernelBuilder(const std::string& name, std::vector<int64_t> shape = {}) {
    k_.set_name(name);
    if (shape.empty()) {
      k_.set_flat(true);
    } else {
      for (int64_t d : shape) k_.add_shape(d);
    }
  }
  // A full (strides empty), scalar or strided input; returns the instruction loading it.
  int input(int dtype, bool scalar = false, const std::vector<int64_t>& strides = {}) {
    Operand* op = k_.add_inputs();
    op->set_dtype(dtype);
    op->set_scalar(scalar);
    for (int64_t s : strides) op->add_strides(s);
    Instr* in = k_.add_body();
    in->set_op("load");
    in->set_dtype(dtype);
    in->set_operand(k_.inputs_size() - 1);
    return k_.body_size() - 1;
  }
  int op(const std::string& name, int dtype, const std::vector<int>& args,
         const std::vector<int64_t>& iattrs = {}) {
    Instr* in = k_.add_body();
    in->set_op(name);
    in->set_dtype(dtype);
    for (int a : args) in->add_args(a);
    for (int64_t v : iattrs) in->add_iattrs(v);
    return k_.body_size() - 1;
  }
  int constant(int dtype, double v) {
    Instr* in = k_.add_body();
    in->set_op("const");
    in->set_dtype(dtype);
    in->set_value(v);
    return k_.body_size() - 1;
  }
  KernelBuilder& output(int instr) {
    k_.add_outputs(instr);
    return *this;
  }
  KernelBuilder& guard(int input_index) {
    k_.set_guard(input_index + 1);
    return *this;
  }
  const KernelDef& def() const { return k_; }

 private:
  KernelDef k_;
};

inline std::string dtype_label(int d) {
  switch (d) {
    case kF16:
      return "f16";
    case kBF16:
      return "bf16";
    case kF32:
      return "f32";
    case kF64:
      return "f64";
    default:
      return "bool";
  }
}

// y = op(x) over a flat range.
inline KernelDef unary_kernel(const std::string& op, int dtype) {
  KernelBuilder b(op + "_" + dtype_label(dtype));
  b.output(b.op(op, dtype, {b.input(dtype)}));
  return b.def();
}

// y = op(a, b); `result` is the result dtype (bool for comparisons), `b_dtype` b's (pow).
inline KernelDef binary_kernel(const std::string& op, int a_dtype, int b_dtype, int result) {
  KernelBuilder b(op + "_" + dtype_label(a_dtype) + "_" + dtype_label(b_dtype));
  const int x = b.input(a_dtype), y = b.input(b_dtype);
  b.output(b.op(op, result, {x, y}));
  return b.def();
}

// Clip's bound instructions (clamp_min, clamp_max): y = op(x, bound), the bound a scalar
// operand as the compiler gives it.
inline KernelDef clamp_kernel(const std::string& op, int dtype) {
  KernelBuilder b(op + "_" + dtype_label(dtype));
  const int x = b.input(dtype), bound = b.input(dtype, true);
  b.output(b.op(op, dtype, {x, bound}));
  return b.def();
}

inline KernelDef cast_kernel(int from, int to) {
  KernelBuilder b("cast_" + dtype_label(from) + "_" + dtype_label(to));
  b.output(b.op("cast", to, {b.input(from)}));
  return b.def();
}

inline KernelDef where_kernel(int dtype) {
  KernelBuilder b("where_" + dtype_label(dtype));
  const int c = b.input(kBool), x = b.input(dtype), y = b.input(dtype);
  b.output(b.op("where", dtype, {c, x, y}));
  return b.def();
}

inline KernelDef isinf_kernel(int dtype, bool pos, bool neg) {
  KernelBuilder b("isinf_" + dtype_label(dtype) + (pos ? "_p" : "") + (neg ? "_n" : ""));
  b.output(b.op("isinf", kBool, {b.input(dtype)}, {pos ? 1 : 0, neg ? 1 : 0}));
  return b.def();
}

// Every instruction on every dtype it takes, one kernel each.
inline std::vector<KernelDef> coverage_kernels() {
  std::vector<KernelDef> ks;
  for (int t : kFloatTypes) {
    for (const auto& op : kUnaryOps) ks.push_back(unary_kernel(op, t));
    for (const auto& op : kBinaryOps) ks.push_back(binary_kernel(op, t, t, t));
    for (const char* op : {"clamp_min", "clamp_max"}) ks.push_back(clamp_kernel(op, t));
    for (const auto& op : kCompareOps) ks.push_back(binary_kernel(op, t, t, kBool));
    for (int e : kFloatTypes) {
      if (e != t) ks.push_back(binary_kernel("pow", t, e, t));
    }
    ks.push_back(where_kernel(t));
    KernelBuilder b("isnan_" + dtype_label(t));
    b.output(b.op("isnan", kBool, {b.input(t)}));
    ks.push_back(b.def());
    for (int m = 0; m < 4; ++m) ks.push_back(isinf_kernel(t, m & 1, m & 2));
  }
  for (int from : kAllTypes) {
    for (int to : kAllTypes) ks.push_back(cast_kernel(from, to));
  }
  for (const auto& op : kLogicOps) ks.push_back(binary_kernel(op, kBool, kBool, kBool));
  ks.push_back(binary_kernel("equal", kBool, kBool, kBool));
  ks.push_back(where_kernel(kBool));
  KernelBuilder b("not_bool");
  b.output(b.op("not", kBool, {b.input(kBool)}));
  ks.push_back(b.def());
  return ks;
}

}  // namespace ampc::kernels::codegen::cgtest
