// The one LLVM IR builder of kernels/codegen: a KernelDef's entry function for the host or for
// NVPTX, the same per-element body for both (README.md: semantics, calling conventions), and
// the LLVM set-up the back ends share. Internal to kernels/codegen (codegen.h is the API).
#pragma once

#include <memory>
#include <string>

#include "kernels/codegen/kernel.pb.h"

namespace llvm {
class Function;
class Module;
class TargetMachine;
}  // namespace llvm

namespace ampc::kernels::codegen {

enum class Target { kHost, kNvptx };

// Adds the kernel's entry to `module` (whose data layout is set) as `symbol`, after
// validate_kernel (instr_set.h):
// host:  void symbol(ptr operands, i64 begin, i64 end), rows vectorisable;
// nvptx: ptx_kernel void symbol(ptr operand_0, ..., ptr operand_n, i64 count), grid-stride.
// Transcendentals call the C library's functions (host) or libdevice's __nv_* (nvptx).
llvm::Function* add_kernel(llvm::Module& module, const KernelDef& kernel, const std::string& symbol,
                           Target target);

// Registers the native target and NVPTX with LLVM, once (thread-safe).
void initialize_llvm();

// Runs LLVM's default per-module pipeline at -O`level` (2 or 3) tuned for `machine`, with loop
// and SLP vectorisation; the machine's pass-builder callbacks (NVVMReflect for NVPTX) run too.
void optimize_module(llvm::Module& module, llvm::TargetMachine& machine, int level);

// llvm_ir_text for a CUDA architecture (ptx.cc).
std::string nvptx_ir_text(const KernelDef& kernel, const std::string& sm);

}  // namespace ampc::kernels::codegen
