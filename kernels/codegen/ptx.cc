// The NVPTX back end: a kernel's module for sm_80 / sm_90 with the CUDA toolkit's libdevice
// linked (its __nv_* math functions), NVVMReflect configured (no flush-to-zero), optimised
// at O3 and printed as PTX.
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Linker/Linker.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include <algorithm>
#include <memory>

#include "base/error.h"
#include "kernels/codegen/codegen.h"
#include "kernels/codegen/ir_builder.h"
#include "kernels/codegen/parallel_compile.h"

namespace ampc::kernels::codegen {
namespace {

constexpr const char* kTriple = "nvptx64-nvidia-cuda";

// libdevice.10.bc, read once; its modules are materialised lazily, per function linked.
const llvm::MemoryBuffer& libdevice() {
#ifdef AMPC_LIBDEVICE
  static const std::unique_ptr<llvm::MemoryBuffer> buffer = [] {
    auto b = llvm::MemoryBuffer::getFile(AMPC_LIBDEVICE);
    return b ? std::move(*b) : nullptr;
  }();
  if (buffer) return *buffer;
  throw Error(std::string("cannot read the CUDA toolkit's libdevice (") + AMPC_LIBDEVICE +
              "): PTX code generation needs it; `--target cpu` needs no PTX");
#else
  throw Error(
      "PTX code generation needs the CUDA toolkit's libdevice (nvvm/libdevice/libdevice.10.bc), "
      "which was not found when ampc was configured; `--target cpu` needs no PTX");
#endif
}

std::unique_ptr<llvm::TargetMachine> nvptx_machine(const std::string& sm) {
  initialize_llvm();
  // PTX ISA versions: 7.0 introduced sm_80, 7.8 sm_90 (LLVM's default, 6.0, predates both).
  std::string features;
  if (sm == "sm_80") {
    features = "+ptx70";
  } else if (sm == "sm_90") {
    features = "+ptx78";
  } else {
    throw Error("CUDA architecture '" + sm + "' is not supported (sm_80, sm_90)");
  }
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(kTriple, error);
  if (!target) throw Error("LLVM has no NVPTX back end: " + error);
  llvm::TargetOptions options;
  options.AllowFPOpFusion = llvm::FPOpFusion::Strict;  // no mul+add -> fma: as the host
  return std::unique_ptr<llvm::TargetMachine>(
      target->createTargetMachine(kTriple, sm, features, options, std::nullopt, std::nullopt,
                                  llvm::CodeGenOptLevel::Aggressive));
}

// A PTX identifier from the kernel's name.
std::string entry_name(const std::string& name) {
  std::string s = name.empty() ? "ampc_kernel" : name;
  for (char& c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!ok) c = '_';
  }
  // Not a digit first, and not in the namespaces of libdevice and LLVM's intrinsics.
  if ((s[0] >= '0' && s[0] <= '9') || s.rfind("__nv", 0) == 0 || s.rfind("llvm", 0) == 0) {
    s = "k_" + s;
  }
  return s;
}

// The kernel's optimised module for `machine`, libdevice linked.
std::unique_ptr<llvm::Module> build_module(const KernelDef& kernel, llvm::TargetMachine& machine,
                                           const std::string& entry, llvm::LLVMContext& context) {
  const llvm::MemoryBuffer& lib_buffer = libdevice();
  auto module = std::make_unique<llvm::Module>(entry, context);
  module->setTargetTriple(kTriple);
  module->setDataLayout(machine.createDataLayout());
  add_kernel(*module, kernel, entry, Target::kNvptx);
  // libdevice's __nvvm_reflect("__CUDA_FTZ") reads this: keep subnormals, as the host does.
  module->addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t{0});
  auto lib = llvm::getLazyBitcodeModule(lib_buffer.getMemBufferRef(), context);
  if (!lib) throw Error("cannot parse libdevice: " + llvm::toString(lib.takeError()));
  (*lib)->setTargetTriple(kTriple);
  (*lib)->setDataLayout(module->getDataLayout());
  if (llvm::Linker::linkModules(*module, std::move(*lib), llvm::Linker::Flags::LinkOnlyNeeded)) {
    throw Error("linking libdevice into kernel '" + kernel.name() + "' failed");
  }
  // Only the entry is visible: the linked library functions inline and disappear.
  for (llvm::Function& f : *module) {
    if (!f.isDeclaration() && f.getName() != entry)
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  optimize_module(*module, machine, 3);
  return module;
}

TargetCode emit_with(const KernelDef& kernel, const std::string& sm, llvm::TargetMachine& machine);

}  // namespace

TargetCode emit_ptx(const KernelDef& kernel, const std::string& sm) {
  auto machine = nvptx_machine(sm);
  return emit_with(kernel, sm, *machine);
}

std::vector<TargetCode> emit_ptx_all(const std::vector<const KernelDef*>& kernels,
                                     const std::string& sm) {
  std::vector<TargetCode> codes(kernels.size());
  if (kernels.empty()) return codes;
  libdevice();  // read once, before the threads share it (and fail early without it)
  // One TargetMachine per worker: a TargetMachine is not shared across threads.
  std::vector<std::unique_ptr<llvm::TargetMachine>> machines(compile_threads(kernels.size()));
  parallel_compile(kernels.size(), [&](size_t worker, size_t i) {
    if (!machines[worker]) machines[worker] = nvptx_machine(sm);
    codes[i] = emit_with(*kernels[i], sm, *machines[worker]);
  });
  return codes;
}

namespace {

TargetCode emit_with(const KernelDef& kernel, const std::string& sm,
                     llvm::TargetMachine& machine_ref) {
  llvm::TargetMachine* machine = &machine_ref;
  const std::string entry = entry_name(kernel.name());
  llvm::LLVMContext context;
  auto module = build_module(kernel, *machine, entry, context);
  llvm::SmallString<0> ptx;
  llvm::raw_svector_ostream out(ptx);
  llvm::legacy::PassManager passes;
  if (machine->addPassesToEmitFile(passes, out, nullptr, llvm::CodeGenFileType::AssemblyFile)) {
    throw Error("the NVPTX back end cannot emit PTX");
  }
  passes.run(*module);
  TargetCode code;
  code.set_target(sm);
  code.set_ptx(ptx.str().str());
  code.set_entry(entry);
  return code;
}

}  // namespace

std::string nvptx_ir_text(const KernelDef& kernel, const std::string& sm) {
  auto machine = nvptx_machine(sm);
  llvm::LLVMContext context;
  auto module = build_module(kernel, *machine, entry_name(kernel.name()), context);
  std::string text;
  llvm::raw_string_ostream out(text);
  module->print(out, nullptr);
  return out.str();
}

}  // namespace ampc::kernels::codegen
