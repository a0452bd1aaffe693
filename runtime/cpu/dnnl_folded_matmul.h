// A folded MatMul step (library_step.h), or a Gemm step with a folded Relu, as one oneDNN
// matmul: the folded operand transposes
// become the operands' strides, the BIAS / RELU epilogues the primitive's bias and ReLU
// post-op, applied to the fp32 accumulator before the one rounding of the output (the
// numerics cuBLASLt's epilogues have on the GPU). Made when the plan is loaded, from the
// plan's static shapes, which is also when the primitive is created.
#pragma once

#include <memory>
#include <vector>

#include "kernels/cpu/dnnl_matmul.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::rt::cpu {

class DnnlFoldedMatmul {
 public:
  struct Folding {
    bool trans_a = false, trans_b = false, bias = false, relu = false;
    // Operands read through, and the result written through, a transpose (GemmParams
    // perm_a / perm_b / perm_y; empty: none).
    std::vector<int64_t> perm_a, perm_b, perm_y;
  };
  // Null where one oneDNN call cannot serve the step: not f32 (or bf16 on a CPU with bf16
  // arithmetic), shapes not static, 1-D operands, batch dimensions other than equal or
  // absent on one side (broadcast as numpy with a view), a bias other than one row of N, an
  // empty product, a view oneDNN serves only with its reference implementation; for a Gemm,
  // operands other than matrices, alpha other than 1, a bias C with beta other than 1.
  static std::unique_ptr<DnnlFoldedMatmul> make(const plan::Step& step, const plan::Plan& plan,
                                                const Folding& folding);

  // y = epilogue(op(a) op(b) + bias): into *y when it already has the output's type and
  // shape (the memory plan's place), else into new storage. False when oneDNN refused at
  // run time (nothing written; the caller runs the unfolded operators).
  bool run(const Tensor& a, const Tensor& b, const Tensor* bias, Tensor* y) const;

 private:
  // Operands or the result through a transpose: the strided form (else the plain one).
  static std::unique_ptr<DnnlFoldedMatmul> make_strided(const plan::Step& step,
                                                        const plan::Plan& plan,
                                                        const Folding& folding);

  kernels::cpu::DnnlMatmul p_;
  bool strided_ = false;
  bool swapped_ = false;  // s_ is the transposed product, B^T A^T: its A is the step's B
  kernels::cpu::DnnlStridedMatmul s_;
  DType type_ = DType::kFloat32;
  std::vector<int64_t> a_shape_, b_shape_, out_shape_;
};

}  // namespace ampc::rt::cpu
