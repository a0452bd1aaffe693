// Work around GEMMs that the library call can do itself, as cuBLASLt does it in one call:
//   - an operand Transpose of the last two axes -> the call reads the operand transposed
//     (GemmParams.trans_a / trans_b, combined with Gemm's own transA / transB);
//   - a bias Add after MatMul (Gemm's C) and a Relu after it -> epilogue BIAS / RELU_BIAS /
//     RELU;
//   - the bias gradient, ReduceSum of the GEMM's 2-D B operand over its rows -> epilogue
//     BGRADB with that sum as the call's second output;
//   - with strided views (CPU plans): a MatMul operand Transpose of another permutation, and a
//     Transpose that is the only reader of a MatMul's result -> the call reads the operand, or
//     writes the result, through that permutation's strides (GemmParams.perm_a / perm_b /
//     perm_y). Attention's head splits and merges ([B, T, H, D] <-> [B, H, T, D], K^T) are such
//     transposes. Only permutations that keep the stored innermost axis among the view's last
//     two are taken: oneDNN's fast kernels need a unit stride there (a result stored with
//     its columns contiguous is computed as the transposed product). cuBLASLt has one batch stride,
//     so CUDA plans keep these transposes as steps.
// An analysis: the IR is not changed (it stays exportable to ONNX); lowering emits the GEMM
// step with what it folds and no steps for the folded nodes. The CPU backend runs the folded
// work with the very operators it replaced (runtime/cpu/library_step.h), so folding never
// changes a result on the CPU. A bias Add is only folded in fp32/fp64: with a 16-bit output
// cuBLASLt rounds once where the unfolded graph rounds the product first. A Relu commutes with
// that rounding (rounding to nearest keeps the sign and maps 0 to 0), so CPU plans fold it after
// a bf16 GEMM too, where oneDNN applies it before its one rounding (on a CPU without bf16
// arithmetic the step runs the Gemm and then the Relu, as unfolded). Not after an fp16 GEMM,
// which the CPU emulates (the operators' path, with the product in a temporary), nor in CUDA
// plans, whose runtime knows the 16-bit epilogues only from the fp32 path's code.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::lower {

struct GemmFold {
  const ir::Node* gemm = nullptr;
  plan::GemmParams::Epilogue epilogue = plan::GemmParams::NONE;
  bool trans_a = false, trans_b = false;
  std::vector<int64_t> perm_a, perm_b, perm_y;  // strided views (empty: none)
  std::vector<const ir::Value*> inputs;         // of the library call (transpose inputs, bias)
  std::vector<const ir::Value*> outputs;        // of the library call (after bias/relu, bias grad)
  std::vector<const ir::Node*> folded;          // nodes that run inside the call
};

struct GemmFoldOptions {
  bool strided_views = false;    // the perm_a / perm_b / perm_y folds (CPU plans)
  bool relu_after_bf16 = false;  // a Relu after a bf16 GEMM (CPU plans)
};

// Every GEMM (MatMul, Gemm) with something to fold, in graph order.
std::vector<GemmFold> find_gemm_folds(const ir::Model& model, const GemmFoldOptions& options = {});

}  // namespace ampc::lower
