// Which GEMM epilogues a plan may carry: the one rule that the compiler's folding
// (lower/gemm_epilogue.cc) and the CUDA backend (runtime/cuda/ops_gemm.cc) go by, so that the
// device never refuses at load a fold the compiler made (the CPU backend runs any fold with the
// operators it replaced). Header-only: the passes do not link the runtime.
#pragma once

#include <cstddef>

#include "base/dtype.h"

namespace ampc::plan {

// BGRADB: the column sums of the GEMM's B operand ([K, N], not transposed) as a second output
// of B's own type, on a GEMM without a C operand. cuBLASLt writes a bias gradient of the
// output's type only (cublasLt.h), and the CUDA backend's fallback (the reduction kernel after
// a plain GEMM) keeps the type too, so an fp32 sum of a 16-bit B is not folded; nor is a sum
// next to a C, which would need two epilogues.
inline bool bias_grad_b_foldable(DType b, DType sum, size_t b_rank, bool trans_b, bool has_c) {
  return b == sum && b_rank == 2 && !trans_b && !has_c;
}

}  // namespace ampc::plan
