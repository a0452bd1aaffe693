// The table of op facts (ops/op_info.h): one row per operator that differs from the defaults.
// Adding an op means adding its row here; the consumers need no change.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "ops/ampc_forms.h"
#include "ops/op_info.h"
#include "ops/op_key.h"

namespace ampc::ops {
namespace {

using F = FusedForm;
using P = Precision;

// A fused elementwise op; `in_place` as OpInfo::in_place.
OpInfo fused(std::string_view op, F form, std::string_view instruction, bool in_place,
             P precision = P::kFollow) {
  return {"", op, Pattern::kElementwise, precision, form, instruction, in_place, false};
}

// An elementwise op that only the CPU op and the CUDA builders compute (never fused).
OpInfo elementwise(std::string_view op, bool in_place, P precision = P::kFollow) {
  return {"", op, Pattern::kElementwise, precision, F::kNone, {}, in_place, false};
}

OpInfo of(std::string_view op, Pattern pattern, P precision = P::kFollow) {
  return {"", op, pattern, precision, F::kNone, {}, false, false};
}

// Reshape and its kin: the output is the input's bytes.
OpInfo view(std::string_view op) {
  return {"", op, Pattern::kView, P::kFollow, F::kNone, {}, false, true, true};
}

// Marks an op whose float results every backend computes bit for bit (OpInfo::exact_float).
OpInfo exact(OpInfo info) {
  info.exact_float = true;
  return info;
}

std::vector<OpInfo> rows() {
  constexpr bool kInPlace = true;
  constexpr bool kNew = false;  // writes a fresh buffer (its output differs in type or count)
  std::vector<OpInfo> t = {
      // Arithmetic and math, fused into generated kernels.
      exact(fused("Add", F::kArith, "add", kInPlace)),
      exact(fused("Sub", F::kArith, "sub", kInPlace)),
      exact(fused("Mul", F::kArith, "mul", kInPlace)),
      exact(fused("Div", F::kArith, "div", kInPlace)),
      fused("Pow", F::kPow, "pow", kInPlace, P::kDeny),
      exact(fused("Max", F::kVariadic, {}, kInPlace)),
      exact(fused("Min", F::kVariadic, {}, kInPlace)),
      fused("Sum", F::kVariadic, {}, kInPlace),
      fused("Mean", F::kVariadic, {}, kNew),
      exact(fused("Neg", F::kUnary, "neg", kInPlace)),
      exact(fused("Abs", F::kUnary, "abs", kInPlace)),
      exact(fused("Sqrt", F::kUnary, "sqrt", kInPlace)),
      fused("Exp", F::kUnary, "exp", kInPlace, P::kDeny),
      fused("Log", F::kUnary, "log", kInPlace, P::kDeny),
      fused("Reciprocal", F::kUnary, "reciprocal", kInPlace, P::kDeny),
      fused("Tanh", F::kUnary, "tanh", kInPlace),
      fused("Erf", F::kUnary, "erf", kInPlace),
      fused("Sigmoid", F::kUnary, "sigmoid", kInPlace),
      fused("Relu", F::kUnary, "relu", kInPlace),
      fused("Sign", F::kUnary, "sign", kInPlace),
      exact(fused("Floor", F::kUnary, "floor", kInPlace)),
      exact(fused("Ceil", F::kUnary, "ceil", kInPlace)),
      exact(fused("Round", F::kUnary, "round", kInPlace)),
      // Comparisons, logic, selection, predicates.
      exact(fused("Equal", F::kCompare, "equal", kNew)),
      exact(fused("Less", F::kCompare, "less", kNew)),
      exact(fused("LessOrEqual", F::kCompare, "less_equal", kNew)),
      exact(fused("Greater", F::kCompare, "greater", kNew)),
      exact(fused("GreaterOrEqual", F::kCompare, "greater_equal", kNew)),
      fused("Not", F::kNot, "not", kInPlace),
      fused("And", F::kLogic, "and", kInPlace),
      fused("Or", F::kLogic, "or", kInPlace),
      fused("Xor", F::kLogic, "xor", kInPlace),
      exact(fused("Where", F::kWhere, "where", kInPlace)),
      fused("IsNaN", F::kPredicate, "isnan", kNew),
      fused("IsInf", F::kPredicate, "isinf", kNew),
      // An explicit Cast is never re-typed by autocast.
      exact(fused("Cast", F::kCast, {}, kInPlace, P::kKeep)),
      // Clip (ReLU6, Hardtanh, clamp): a bound at a time, the builder's clamp instructions.
      exact(fused("Clip", F::kClip, {}, kInPlace)),
      // HardSigmoid, HardSwish (MobileNet v3) and the other activations of torch.nn: the CPU
      // op's expression as instructions (exp through the shared definition, expm1 and log1p
      // through the C library or libdevice, as log and tanh).
      exact(fused("HardSigmoid", F::kActivation, {}, kInPlace)),
      exact(fused("HardSwish", F::kActivation, {}, kInPlace)),
      exact(fused("LeakyRelu", F::kActivation, {}, kInPlace)),
      exact(fused("PRelu", F::kPRelu, {}, kInPlace)),
      exact(fused("Softsign", F::kActivation, {}, kInPlace)),
      exact(fused("ThresholdedRelu", F::kActivation, {}, kInPlace)),
      fused("Elu", F::kActivation, {}, kInPlace),
      fused("Celu", F::kActivation, {}, kInPlace),
      fused("Selu", F::kActivation, {}, kInPlace),
      fused("Softplus", F::kActivation, {}, kInPlace, P::kDeny),
      // Elementwise, unfused.
      fused("Cos", F::kUnary, "cos", kInPlace),
      fused("Sin", F::kUnary, "sin", kInPlace),
      // PyTorch's autocast runs acos, asin, cosh, sinh and tan in fp32; the others follow.
      fused("Tan", F::kUnary, "tan", kInPlace, P::kDeny),
      fused("Asin", F::kUnary, "asin", kInPlace, P::kDeny),
      fused("Acos", F::kUnary, "acos", kInPlace, P::kDeny),
      fused("Sinh", F::kUnary, "sinh", kInPlace, P::kDeny),
      fused("Cosh", F::kUnary, "cosh", kInPlace, P::kDeny),
      fused("Atan", F::kUnary, "atan", kInPlace),
      fused("Asinh", F::kUnary, "asinh", kInPlace),
      fused("Acosh", F::kUnary, "acosh", kInPlace),
      fused("Atanh", F::kUnary, "atanh", kInPlace),
      elementwise("Gelu", kInPlace),
      elementwise("Mod", kInPlace),
      // Contractions: the low dtype (and recurrent layers, which are made of them).
      of("MatMul", Pattern::kGemm, P::kAllow),
      of("Gemm", Pattern::kGemm, P::kAllow),
      of("Conv", Pattern::kGemm, P::kAllow),
      of("ConvTranspose", Pattern::kGemm, P::kAllow),
      of("Einsum", Pattern::kGemm, P::kAllow),
      of("LSTM", Pattern::kOpaque, P::kAllow),
      of("GRU", Pattern::kOpaque, P::kAllow),
      of("RNN", Pattern::kOpaque, P::kAllow),
      // Row-wise: fp32.
      of("Softmax", Pattern::kRowwise, P::kDeny),
      of("LogSoftmax", Pattern::kRowwise, P::kDeny),
      of("LayerNormalization", Pattern::kRowwise, P::kDeny),
      of("GroupNormalization", Pattern::kRowwise, P::kDeny),
      of("InstanceNormalization", Pattern::kRowwise, P::kDeny),
      of("LpNormalization", Pattern::kRowwise, P::kDeny),
      // Reductions: sums in fp32, max/min and pooling follow their input.
      of("ReduceSum", Pattern::kReduction, P::kDeny),
      of("ReduceMean", Pattern::kReduction, P::kDeny),
      of("ReduceProd", Pattern::kReduction, P::kDeny),
      of("ReduceL1", Pattern::kReduction, P::kDeny),
      of("ReduceL2", Pattern::kReduction, P::kDeny),
      of("ReduceLogSum", Pattern::kReduction, P::kDeny),
      of("ReduceLogSumExp", Pattern::kReduction, P::kDeny),
      of("ReduceSumSquare", Pattern::kReduction, P::kDeny),
      of("ReduceMax", Pattern::kReduction),
      of("ReduceMin", Pattern::kReduction),
      of("ArgMax", Pattern::kReduction),
      of("ArgMin", Pattern::kReduction),
      of("MaxPool", Pattern::kReduction),
      of("AveragePool", Pattern::kReduction),
      of("GlobalAveragePool", Pattern::kReduction),
      of("GlobalMaxPool", Pattern::kReduction),
      of("BatchNormalization", Pattern::kReduction),
      // Other fp32 ops: losses, prefix sums, interpolation.
      of("CumSum", Pattern::kOpaque, P::kDeny),
      of("SoftmaxCrossEntropyLoss", Pattern::kOpaque, P::kDeny),
      of("NegativeLogLikelihoodLoss", Pattern::kOpaque, P::kDeny),
      of("Resize", Pattern::kOpaque, P::kDeny),
      of("Upsample", Pattern::kOpaque, P::kDeny),
      // Views and data movement.
      view("Reshape"),
      view("Flatten"),
      view("Squeeze"),
      view("Unsqueeze"),
      {"", "Identity", Pattern::kView, P::kFollow, F::kIdentity, {}, false, true, true},
      {"", "Transpose", Pattern::kDataMovement, P::kFollow, F::kNone, {}, false, true, true},
      exact(of("ConstantOfShape", Pattern::kOpaque)),
  };
  for (const char* op : {"Concat", "Split", "Slice", "Gather", "Expand", "Tile"})
    t.push_back(exact(of(op, Pattern::kDataMovement)));
  for (const char* op : {"Dropout", "RandomNormal", "RandomUniform", "RandomNormalLike",
                         "RandomUniformLike", "Bernoulli", "Multinomial"}) {
    OpInfo info = of(op, Pattern::kOpaque);
    info.random = true;
    t.push_back(info);
  }
  for (const char* op : {"GatherElements", "GatherND", "ScatterND", "ScatterElements", "Pad"})
    t.push_back(of(op, Pattern::kDataMovement));
  return t;
}

bool key_less(const OpInfo& a, const OpInfo& b) {
  return a.domain != b.domain ? a.domain < b.domain : a.op < b.op;
}

// The activations' ampc forms (ops/ampc_forms.h) are the ONNX ops with bfloat16 allowed:
// their rows are copies, so they fuse and run in place as the ONNX ops do.
void add_ampc_forms(std::vector<OpInfo>& t) {
  for (std::string_view op : ampc_activation_forms()) {
    const auto onnx_row = std::find_if(
        t.begin(), t.end(), [op](const OpInfo& i) { return i.domain.empty() && i.op == op; });
    if (onnx_row == t.end())  // a programming error: caught by the first test that runs
      throw std::logic_error("ops/op_table.cc: no row for " + std::string(op));
    OpInfo form = *onnx_row;
    form.domain = "ampc";
    t.push_back(form);
  }
}

std::vector<OpInfo> sorted_table() {
  std::vector<OpInfo> t = rows();
  add_ampc_forms(t);
  std::sort(t.begin(), t.end(), key_less);
  for (size_t i = 1; i < t.size(); ++i) {
    if (!key_less(t[i - 1], t[i]))  // a programming error: caught by the first test that runs
      throw std::logic_error("ops/op_table.cc: two rows for " + std::string(t[i].op));
  }
  return t;
}

}  // namespace

const std::vector<OpInfo>& all_op_infos() {
  static const std::vector<OpInfo> table = sorted_table();
  return table;
}

const OpInfo* find_op_info(std::string_view domain, std::string_view op) {
  const auto& t = all_op_infos();
  OpInfo probe;
  probe.domain = canonical_domain(domain);
  probe.op = op;
  auto it = std::lower_bound(t.begin(), t.end(), probe, key_less);
  return it != t.end() && it->domain == probe.domain && it->op == op ? &*it : nullptr;
}

const OpInfo& op_info(std::string_view domain, std::string_view op) {
  static const OpInfo unlisted{};
  const OpInfo* info = find_op_info(domain, op);
  return info ? *info : unlisted;
}

}  // namespace ampc::ops
