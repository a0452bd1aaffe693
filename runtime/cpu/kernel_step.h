// Fused-kernel steps (op "FusedElementwise", domain "ampc.kernel") on the CPU: the plan's
// KernelDefs compiled once for this machine (kernels/codegen's ORC JIT), and one step run
// as calls of the host function over its element range, split across OpenMP threads as the
// CPU elementwise kernels split theirs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/codegen/codegen.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::rt::cpu {

// Whether a step runs a fused kernel of Plan.kernels.
bool is_kernel_step(const plan::Step& step);

// A kernel step resolved against the compiled kernels.
struct KernelCall {
  kernels::codegen::HostKernelFn fn = nullptr;
  const kernels::KernelDef* def = nullptr;
  int segments = 1;
  std::string label;  // how errors name the step (made once, at load)
};

class KernelSteps {
 public:
  // Compiles every kernel of the plan (nothing when it has none). Throws ampc::Error when a
  // kernel cannot be compiled.
  explicit KernelSteps(const plan::Plan& plan);
  ~KernelSteps();

  // The kernel of step `step`, with its operand counts and element types checked against
  // the plan's buffers; throws ampc::Error naming the step otherwise.
  KernelCall resolve(const plan::Plan& plan, const plan::Step& step) const;

 private:
  std::unique_ptr<kernels::codegen::HostKernels> host_;
};

// Runs a resolved kernel step: `inputs` and `outputs` hold every segment's operands in
// order; outputs are allocated (or, written in place, hold the state) by the caller. Checks
// every operand's size against the kernel's iteration space first.
void run_kernel_step(const KernelCall& call, const std::vector<const Tensor*>& inputs,
                     const std::vector<Tensor*>& outputs);

}  // namespace ampc::rt::cpu
