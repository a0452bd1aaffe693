// A GEMM step with what the compiler folded into it (lower/gemm_epilogue.h): operand
// transposes of a MatMul (GemmParams.trans_a / trans_b; a Gemm reads its own), a MatMul's
// operand and result views of any permutation (perm_a / perm_b / perm_y) and an epilogue
// (GemmParams.epilogue: BIAS, RELU, RELU_BIAS, BGRADB). Where oneDNN serves the GEMM (a MatMul,
// or a Gemm with a folded Relu; f32, and bf16 on CPUs with bf16 arithmetic) the CPU backend
// hands it the same description the CUDA backend
// hands cuBLASLt: transposes as strides, the epilogue applied before the one rounding of the output
// (dnnl_folded_matmul.h). Elsewhere (fp16, other types and shapes) it runs the folded work
// with the very operators it replaced (Transpose, Add, Relu, ReduceSum), which computes bit
// for bit what the plan computed before folding.
#pragma once

#include <string>
#include <vector>

#include "runtime/cpu/dnnl_folded_matmul.h"
#include "runtime/cpu/op_registry.h"

namespace ampc::rt::cpu {

// Whether the step carries folded work (then run it through a FoldedGemm).
bool has_folded_work(const plan::Step& step);

// A folded GEMM step, prepared when the plan is loaded: the call without the folded work
// and the operators of the folded work. Throws ampc::Error, naming the node, for
// an epilogue the CPU backend does not know.
class FoldedGemm {
 public:
  // `op` is the step's MatMul or Gemm; `step` (a step of `plan`, whose buffers give the
  // operands' ranks) must outlive this object.
  FoldedGemm(const CpuOp& op, const plan::Step& step, const plan::Plan& plan);

  void run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs) const;

 private:
  // One folded operator with the step it runs as (parameters, opset, name for errors).
  struct Folded {
    const CpuOp* op = nullptr;
    plan::Step step;
  };
  Folded folded(const std::string& op) const;
  void run_folded(const Folded& f, const std::vector<const Tensor*>& inputs, Tensor* out) const;

  const CpuOp& op_;
  const plan::Step& step_;
  plan::Step call_;  // the GEMM itself
  bool trans_a_ = false, trans_b_ = false, bias_input_ = false, relu_ = false, bgrad_ = false;
  size_t core_inputs_ = 0;
  Folded transpose_a_, transpose_b_, add_, relu_op_, reduce_sum_;
  Folded view_a_, view_b_, view_y_;         // GemmParams.perm_a / perm_b / perm_y (op null: none)
  std::unique_ptr<DnnlFoldedMatmul> dnnl_;  // null: the unfolded operators run
  int dnnl_bias_ = -1;                      // the input dnnl_ adds as its bias (-1: none)
};

}  // namespace ampc::rt::cpu
