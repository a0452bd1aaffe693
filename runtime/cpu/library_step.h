// A GEMM step with what the compiler folded into it (passes/gemm_epilogue.h): operand
// transposes (attributes ampc_trans_a / ampc_trans_b) and an epilogue (Step.epilogue: BIAS,
// RELU, RELU_BIAS, BGRADB). The CPU backend runs the folded work with the very operators it
// replaced (Transpose, Add, Relu, ReduceSum), so a plan computes bit for bit what it computed
// before folding; the CUDA backend hands the same description to cuBLASLt.
#pragma once

#include <vector>

#include "runtime/cpu/op_registry.h"

namespace ampc::rt::cpu {

// Whether the step carries folded work (then run it with run_library_step).
bool has_folded_work(const plan::Step& step);

// Runs `op` (the step's MatMul or Gemm) with the step's transposes and epilogue.
void run_library_step(const CpuOp& op, const plan::Step& step,
                      const std::vector<const Tensor*>& inputs,
                      const std::vector<Tensor*>& outputs);

}  // namespace ampc::rt::cpu
