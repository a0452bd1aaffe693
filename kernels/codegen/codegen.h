// Code generation for fused elementwise kernels (kernel.proto's KernelDef) through LLVM 19:
// one LLVM IR builder, two back ends (NVPTX for CUDA, the host through ORC LLJIT). See
// README.md for the instruction set and the calling conventions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/codegen/kernel.pb.h"

namespace ampc::kernels::codegen {

// Host entry of a kernel: operands are the kernel's inputs then its outputs (base pointers of
// contiguous tensors); computes elements [begin, end) of the iteration space (the element
// count is product(shape), or for a flat kernel the size of its outputs). Callers split the
// range across threads.
using HostKernelFn = void (*)(void* const* operands, int64_t begin, int64_t end);

// Host code for a set of kernels, compiled once for this machine (vectorised for its CPU).
// Throws ampc::Error when a kernel uses an instruction the code generator does not know.
// The entries live as long as this object; any number of threads may call them at once.
class HostKernels {
 public:
  explicit HostKernels(const std::vector<const KernelDef*>& kernels);
  ~HostKernels();
  HostKernels(const HostKernels&) = delete;
  HostKernels& operator=(const HostKernels&) = delete;

  // The compiled entry of the kernel named `name`; null when there is none.
  HostKernelFn find(const std::string& name) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// PTX of one kernel for a CUDA architecture ("sm_80" or "sm_90"), libdevice linked for the
// transcendental functions, NVVMReflect configured.
TargetCode emit_ptx(const KernelDef& kernel, const std::string& sm);
// emit_ptx for several kernels, on as many threads as the machine has (at most 16).
std::vector<TargetCode> emit_ptx_all(const std::vector<const KernelDef*>& kernels,
                                     const std::string& sm);

// The kernel's LLVM IR as text (after optimisation), for `ampc inspect --show llvm`: for the
// host when `sm` is empty, otherwise for that CUDA architecture.
std::string llvm_ir_text(const KernelDef& kernel, const std::string& sm = "");

// The CPU host code is compiled for, detected when the first plan is loaded (LLVM's
// sys::getHostCPUName / getHostCPUFeatures): e.g. "znver4" with "avx512f", "avx512bf16".
struct HostTarget {
  std::string cpu;
  std::vector<std::string> features;  // enabled ones, sorted
  bool has(const std::string& feature) const;
};
const HostTarget& host_target();

// One kernel's host machine code as assembly text (what HostKernels runs), for tests and
// `ampc inspect --show asm`.
std::string host_assembly(const KernelDef& kernel);

// Two kernels with the same key compile to the same code (everything but the name and the
// generated code enters the key), so a plan defines each distinct kernel once.
std::string structure_key(const KernelDef& kernel);

}  // namespace ampc::kernels::codegen
