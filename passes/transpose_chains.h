// Transpose chains composed: Transpose(Transpose(x, p1), p2) reads x with the one permutation
// p1[p2[i]], and a composition that is the identity is no Transpose at all (its readers read
// x). Autodiff makes such chains: the gradient of a MatMul transposes an operand that the
// forward transposed already (attention's heads: q = Transpose(x, [0, 2, 1, 3]), then q^T
// for dK). Composed, the forward transpose keeps only its forward reader and each transpose
// reads the stored tensor, so lowering can fold both into their GEMMs as strided views
// (lower/gemm_epilogue.h) and a plan moves the data once or not at all. Exact: transposes
// only move values. The inner Transpose stays while it has other readers. The pipeline runs
// it for CPU plans only: a CUDA plan folds a chain's outer swap of the last two axes into
// cuBLASLt's flags, and the composed permutation would be a copy there.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Returns the number of Transposes that now read the chain's source.
int compose_transposes(ir::Model& model);

}  // namespace ampc::passes
