// What the compiler and the runtimes know about each operator, in one place: its autocast
// class, its fusion pattern, how the code generator builds it, whether its output is a view
// and whether the memory plan may write it in place. Autocast, fusion, kernel building, the
// memory plan, range statistics and both executors read these facts here instead of keeping
// their own lists (ops/README.md).
//
// What is code rather than a fact (a gradient rule, a CPU op, a CUDA step builder) stays in
// the registry of the library that owns it, under the same key (ops/op_key.h).
#pragma once

#include <string_view>
#include <vector>

namespace ampc::ops {

// Autocast's class of an op of the default domain (../shared/amp-semantics.md section 2).
enum class Precision : unsigned char {
  kFollow,  // the widest float dtype of its inputs (the default)
  kAllow,   // the low dtype: float inputs cast down
  kDeny,    // fp32: float inputs cast up
  kKeep,    // never re-typed (explicit Casts)
};

// The shape of the computation, for fusion and for readers of a plan.
enum class Pattern : unsigned char {
  kOpaque,        // anything else
  kElementwise,   // output element i from element i of each (broadcast) input
  kRowwise,       // a reduction along an axis and a map over the same row (Softmax, norms)
  kReduction,     // reduces axes or windows (Reduce*, pooling, BatchNormalization)
  kGemm,          // contractions (MatMul, Gemm, convolutions)
  kDataMovement,  // moves elements without arithmetic (Transpose, Concat, Gather, ...)
  kView,          // reinterprets its input's bytes: no kernel runs (Reshape, Squeeze, ...)
};

// How the fused-kernel builder (lower/kernel_builder.cc) emits an op and which
// operand types fusion accepts (lower/fusion.cc); kNone: never fused.
enum class FusedForm : unsigned char {
  kNone,
  kArith,       // two operands of one float type
  kPow,         // two float operands
  kVariadic,    // Max, Min, Sum, Mean: any number of operands of one float type
  kUnary,       // one float operand
  kCompare,     // two operands of one float type (Equal also bool); bool result
  kNot,         // one bool operand
  kLogic,       // two bool operands
  kWhere,       // bool condition, two operands of one type
  kClip,        // Clip: one float operand, then its bounds as scalars of its type
  kActivation,  // activations the builder expands from the CPU op's expression (HardSigmoid,
                // HardSwish, LeakyRelu, Elu, Celu, Selu, Softplus, Softsign, ThresholdedRelu):
                // one float operand, computed in its opmath type
  kPRelu,       // PRelu: a float operand and a slope of its type that broadcasts to it
  kPredicate,   // one float operand, bool result (IsNaN, IsInf)
  kCast,
  kIdentity,
};

struct OpInfo {
  std::string_view domain;  // canonical ("" is ONNX's default domain)
  std::string_view op;
  Pattern pattern = Pattern::kOpaque;
  Precision precision = Precision::kFollow;
  FusedForm fused = FusedForm::kNone;
  // The kernel instruction (kernels/codegen/instr_set.h) of a fused op with a one-to-one
  // instruction; empty for the forms the builder expands (variadic, Clip, the hard
  // activations, Cast, Identity).
  std::string_view instruction;
  // Unfused, the memory plan may write its output over an input it reads last (its output
  // element i depends only on input element i).
  bool in_place = false;
  // Only moves or reinterprets elements: casting its input or its output is the same
  // (autocast moves casts across it; range statistics look through it).
  bool moves_elements = false;
  // Its float32/float64 results are exact or correctly rounded (data movement, comparisons,
  // IEEE's +, -, *, /, sqrt), so every backend computes the same bits: constant folding may
  // compute it at compile time on float data (passes/constant_folding.cc).
  bool exact_float = false;
  // Its result is drawn at random: two nodes are the same only with the same seed (common
  // subexpressions are not merged) and it is never computed at compile time.
  bool random = false;

  bool is_view() const { return pattern == Pattern::kView; }
};

// The facts of an op; an op without an entry gets the defaults (opaque, FOLLOW, not fused,
// not in place), which is what every consumer assumed of an unlisted op.
const OpInfo& op_info(std::string_view domain, std::string_view op);
// Null when the op has no entry.
const OpInfo* find_op_info(std::string_view domain, std::string_view op);
// Every entry, sorted by domain and op (ops/op_table.cc).
const std::vector<OpInfo>& all_op_infos();

}  // namespace ampc::ops
