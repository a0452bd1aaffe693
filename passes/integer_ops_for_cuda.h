// Elementwise integer arithmetic that has no CUDA kernel, as ops that do, for CUDA plans:
// index and position arithmetic (`(mask.cumsum(-1) - 1).clamp(min=0)`, `torch.maximum` of
// lengths, `positions % window`) on int32 / int64. The CUDA backend's integer kernels are Add,
// Sub, Mul, Div, the comparisons, the logical ops and Where, so:
// - Clip: a Where of Less with the lower bound, then of Greater with the upper one;
// - Max / Min (any number of operands, broadcasting): pairwise Wheres of Greater / Less;
// - Neg: 0 - x; Abs: a Where of Less than 0 between -x and x (both wrap at the type's minimum,
//   as the CPU ops do);
// - Mod: a - (a / b) * b with the CPU op's rules: 0 where b is 0, and without fmod the sign of
//   the divisor (b added where the remainder is not 0 and its sign differs from b's).
// Exact: the CPU ops' results bit for bit. Float data is left alone (those ops are generated
// kernels for CUDA targets), and so is a Clip whose bounds are not scalars.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Returns the number of nodes rewritten.
int integer_ops_for_cuda(ir::Model& model);

}  // namespace ampc::passes
