// The code generator's element types and instruction set (README.md), and the validation
// of a KernelDef against them. Internal to kernels/codegen; free of LLVM headers.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "kernels/codegen/kernel.pb.h"

namespace ampc::kernels::codegen {

// ONNX TensorProto.DataType codes of the supported element types.
constexpr int kF32 = 1, kBool = 9, kF16 = 10, kF64 = 11, kBF16 = 16;

inline bool supported_dtype(int d) {
  return d == kF32 || d == kBool || d == kF16 || d == kF64 || d == kBF16;
}
inline bool is_float(int d) {
  return supported_dtype(d) && d != kBool;
}

inline const std::set<std::string> kUnaryFloat = {
    "neg",   "abs",  "sqrt",  "exp",  "log",     "tanh",  "erf",   "relu",  "reciprocal",
    "floor", "ceil", "round", "sign", "sigmoid", "expm1", "log1p", "sin",   "cos",
    "tan",   "asin", "acos",  "atan", "sinh",    "cosh",  "asinh", "acosh", "atanh"};
inline const std::set<std::string> kBinaryFloat = {"add", "sub", "mul",       "div",
                                                   "max", "min", "clamp_min", "clamp_max"};
inline const std::set<std::string> kCompare = {"equal", "less", "less_equal", "greater",
                                               "greater_equal"};

// The number of arguments of `op`, or -1 when the code generator does not know it.
inline int arity(const std::string& op) {
  if (op == "load" || op == "const") return 0;
  if (op == "cast" || op == "not" || op == "isnan" || op == "isinf" || kUnaryFloat.count(op))
    return 1;
  if (op == "pow" || op == "and" || op == "or" || op == "xor" || kBinaryFloat.count(op) ||
      kCompare.count(op))
    return 2;
  if (op == "where") return 3;
  return -1;
}

// A broadcast operand: neither scalar nor laid out like the iteration space.
inline bool strided(const Operand& op) {
  return !op.scalar() && op.strides_size() > 0;
}

// Throws ampc::Error naming the first unsupported instruction or dtype, or the malformed
// reference (argument, operand, output, guard, strides).
void validate_kernel(const KernelDef& kernel);

// Elements a strided operand spans: 1 + sum over dimensions of (extent - 1) * stride; what
// a backend checks the operand's buffer holds before it runs the kernel.
int64_t strided_extent(const KernelDef& kernel, const Operand& operand);

}  // namespace ampc::kernels::codegen
