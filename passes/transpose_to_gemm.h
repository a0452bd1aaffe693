// Transposes moved next to the GEMMs that read or write them, across an elementwise op with a
// scalar operand (Mul, Div, Add, Sub by a scalar; Cast, Neg): CPU plans read a MatMul's
// operands and write its result through strided views (lower/gemm_epilogue.h), but only
// where the Transpose touches the MatMul itself. torch.nn's MultiheadAttention scales q
// after its head transpose, Transpose -> Div -> MatMul, and autodiff mirrors that as
// MatMul -> Div -> Transpose for q's gradient. Swapped, the transpose sits on the GEMM's
// side and folds:
//   E(Transpose(x), s), read only by MatMuls and Transposes  ->  Transpose(E(x, s))
//   Transpose(E(y, s)) with y a MatMul's result read only by E  ->  E(Transpose(y), s)
// Exact: the op is applied to the same elements with the same scalar; the transpose only
// moves them. Each moved transpose must have been the op's only reader or operand source,
// so nothing is computed twice. The pipeline runs it for CPU plans only, before
// compose-transposes (which then composes the backward's chains through these transposes).
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Returns the number of transposes moved.
int move_transposes_to_gemms(ir::Model& model);

}  // namespace ampc::passes
