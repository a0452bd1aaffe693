// The legalize stage: resolves what an ONNX node's opset and attributes mean into the step's
// typed parameters (plan.proto's Step.params), once, and drops the attributes, for the ops that
// both backends run with hand-written kernels or library calls: Softmax, LogSoftmax, Hardmax,
// LayerNormalization, InstanceNormalization, the Reduce* ops, BatchNormalization,
// SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss, MaxPool, AveragePool, LpPool, GlobalLpPool,
// Conv, ConvInteger, their ampc forms and gradients, ConvTranspose, MatMul and Gemm, Dropout,
// DepthToSpace, SpaceToDepth, ConstantOfShape, and the loss scaler's ampc.UpdateScale and
// ampc.ClipGradNorm. Defaults, opset differences (Softmax's 2-D
// coercion before opset 13, BatchNormalization's training outputs before opset 14), negative axes,
// a Reduce op's axes input and auto_pad's spelling are settled here, so the backends cannot read
// them differently. Plan emission then adds what the compiler folded into a GEMM call (the
// transposes and the epilogue, lower/gemm_epilogue.h). The data movement both backends run
// (Transpose, Concat, Split, Gather, Cast, Slice, Pad, the all-reduce's start and wait) is in
// legalize_movement.cc. Other ops keep their attributes: the long tail that only the CPU
// backend runs.
//
// Plan emission (lower/plan_emit.cc) legalizes every step it writes; constant folding's CPU
// evaluation (passes/cpu_evaluation.cc) legalizes the one-node step it runs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::lower {

// What legalize needs to know of a step's operands.
struct StepOperands {
  // The rank of each input (nullopt: omitted, or unknown).
  std::vector<std::optional<int64_t>> input_ranks;
  // The integer values of input `i` when it is a constant (a Reduce op's axes); nullopt when
  // it is not one. May be empty when no op asks.
  std::function<std::optional<std::vector<int64_t>>(int)> constant_ints;
};

// Whether (domain, op) has typed parameters, i.e. legalize rewrites its steps.
bool has_typed_params(const std::string& domain, const std::string& op);

// Fills `step`'s typed parameters from its op, opset, attributes and operands, and clears its
// attributes; does nothing for ops without typed parameters. A Reduce op's axes input is
// dropped from the step's inputs (its values are in the parameters). Throws ampc::Error
// naming the node for an attribute the op does not accept (an axis out of range, an unknown
// reduction, a missing rank).
void legalize_step(plan::Step& step, const StepOperands& operands);

// legalize_step for a step run outside a plan on the tensors `inputs` (null: omitted), with
// `num_outputs` outputs present: one op on given data (the CPU operators' tests).
void legalize_for_tensors(plan::Step& step, const std::vector<const rt::Tensor*>& inputs,
                          int num_outputs);

}  // namespace ampc::lower
