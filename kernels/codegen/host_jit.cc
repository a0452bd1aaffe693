// The host back end: a plan's kernels, optimised for this CPU (O2, vectorised), compiled to
// object code on joined threads and linked into the process through ORC LLJIT. The C library's math
// functions are resolved from the process, so they are the very ones the CPU ops call.
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/SmallVectorMemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <algorithm>

#include <unordered_map>

#include "base/error.h"
#include "kernels/codegen/codegen.h"
#include "kernels/codegen/ir_builder.h"
#include "kernels/codegen/parallel_compile.h"

namespace ampc::kernels::codegen {
namespace {

template <typename T>
T take(llvm::Expected<T> v, const std::string& what) {
  if (!v) throw Error(what + ": " + llvm::toString(v.takeError()));
  return std::move(*v);
}

void check(llvm::Error e, const std::string& what) {
  if (e) throw Error(what + ": " + llvm::toString(std::move(e)));
}

// The machine this process runs on, as LLVM detects it: the CPU's name and every feature it
// has (AVX-512, AVX512-BF16, ...). A plan carries no host code; the kernels are compiled for
// this CPU when the plan is loaded, so a plan stays portable between machines.
HostTarget detect_host() {
  HostTarget t;
  t.cpu = llvm::sys::getHostCPUName().str();
  for (const auto& f : llvm::sys::getHostCPUFeatures()) {
    if (f.getValue()) t.features.push_back(f.getKey().str());
  }
  std::sort(t.features.begin(), t.features.end());
  return t;
}

// The host machine, without mul+add contraction so that both targets round alike.
llvm::orc::JITTargetMachineBuilder host_machine_builder() {
  initialize_llvm();
  llvm::orc::JITTargetMachineBuilder jtmb{llvm::Triple(llvm::sys::getProcessTriple())};
  const HostTarget& host = host_target();
  jtmb.setCPU(host.cpu);
  for (const auto& f : llvm::sys::getHostCPUFeatures()) {
    jtmb.getFeatures().AddFeature(f.getKey(), f.getValue());
  }
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
  jtmb.getOptions().AllowFPOpFusion = llvm::FPOpFusion::Strict;
  return jtmb;
}

// With AVX-512 the loops use the full 512-bit registers: LLVM's tuning for many AVX-512 CPUs
// prefers 256-bit vectors (a frequency concern of early Xeons), which halves the width of
// these memory-streaming loops for nothing.
void tune_for_host(llvm::Module& module) {
  if (!host_target().has("avx512f")) return;
  for (llvm::Function& f : module) {
    if (!f.isDeclaration()) f.addFnAttr("prefer-vector-width", "512");
  }
}

// Kernel names may be anything (even "exp"): the objects' symbols are numbered instead.
std::string symbol_of(size_t kernel) {
  return "ampc_kernel_" + std::to_string(kernel);
}

// module compiled by machine to an object file or assembly text (`what` names it in errors).
llvm::SmallVector<char, 0> emit(llvm::Module& module, llvm::TargetMachine& machine,
                                llvm::CodeGenFileType type, const char* what) {
  llvm::SmallVector<char, 0> bytes;
  llvm::raw_svector_ostream out(bytes);
  llvm::legacy::PassManager passes;
  if (machine.addPassesToEmitFile(passes, out, nullptr, type)) {
    throw Error(std::string("the host back end cannot emit ") + what);
  }
  passes.run(module);
  return bytes;
}

// module holds kernel alone for the host target, optimised as the JIT optimises it (the IR and
// assembly listings). Prefixed: a kernel named like a C library function ("exp") must not
// shadow it.
void add_listed_kernel(llvm::Module& module, llvm::TargetMachine& machine,
                       const KernelDef& kernel) {
  module.setDataLayout(machine.createDataLayout());
  module.setTargetTriple(machine.getTargetTriple().str());
  add_kernel(module, kernel, "ampc_" + kernel.name(), Target::kHost);
  tune_for_host(module);
  optimize_module(module, machine, 2);
}

// One object file of host code for the kernels kernels[first], kernels[first + stride], ...,
// each under the symbol symbol_of(i): built, optimised and compiled to machine code with a
// context and a target machine of this call's own (neither may be shared between threads).
std::unique_ptr<llvm::MemoryBuffer> compile_chunk(const std::vector<const KernelDef*>& kernels,
                                                  size_t first, size_t stride,
                                                  const llvm::orc::JITTargetMachineBuilder& jtmb,
                                                  const llvm::DataLayout& layout) {
  auto builder = jtmb;
  auto machine = take(builder.createTargetMachine(), "LLVM host target");
  llvm::LLVMContext context;
  llvm::Module module("ampc_host_kernels", context);
  module.setDataLayout(layout);
  module.setTargetTriple(jtmb.getTargetTriple().str());
  for (size_t i = first; i < kernels.size(); i += stride) {
    add_kernel(module, *kernels[i], symbol_of(i), Target::kHost);
  }
  tune_for_host(module);
  optimize_module(module, *machine, 2);
  llvm::SmallVector<char, 0> object =
      emit(module, *machine, llvm::CodeGenFileType::ObjectFile, "object code");
  return std::make_unique<llvm::SmallVectorMemoryBuffer>(std::move(object), "ampc_host_kernels",
                                                         /*RequiresNullTerminator=*/false);
}

}  // namespace

struct HostKernels::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unordered_map<std::string, HostKernelFn> entries;
};

HostKernels::HostKernels(const std::vector<const KernelDef*>& kernels)
    : impl_(std::make_unique<Impl>()) {
  if (kernels.empty()) return;
  for (const KernelDef* kernel : kernels) {
    if (!impl_->entries.emplace(kernel->name(), nullptr).second) {
      throw Error("two kernels are named '" + kernel->name() + "'");
    }
  }
  // The JIT only links: it has no compile threads of its own, so it starts no thread and
  // every task it runs, runs on this one. The kernels go into `chunks` modules that are
  // optimised and compiled to object code in parallel by parallel_compile, whose threads are
  // joined before it returns.
  auto jtmb = host_machine_builder();
  impl_->jit =
      take(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(jtmb).create(), "LLVM JIT");
  llvm::orc::LLJIT& jit = *impl_->jit;
  jit.getMainJITDylib().addGenerator(
      take(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
               jit.getDataLayout().getGlobalPrefix()),
           "LLVM process symbols"));
  const size_t chunks = compile_threads(kernels.size());
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> objects(chunks);
  parallel_compile(chunks, [&](size_t, size_t c) {
    objects[c] = compile_chunk(kernels, c, chunks, jtmb, jit.getDataLayout());
  });
  for (auto& object : objects) check(jit.addObjectFile(std::move(object)), "LLVM JIT");
  // One lookup of every entry links the objects.
  llvm::orc::SymbolLookupSet lookup;
  std::vector<llvm::orc::SymbolStringPtr> symbols;
  for (size_t i = 0; i < kernels.size(); ++i) {
    symbols.push_back(jit.mangleAndIntern(symbol_of(i)));
    lookup.add(symbols.back());
  }
  const auto found =
      take(jit.getExecutionSession().lookup(
               llvm::orc::makeJITDylibSearchOrder(&jit.getMainJITDylib()), std::move(lookup)),
           "LLVM JIT link");
  for (size_t i = 0; i < kernels.size(); ++i) {
    impl_->entries[kernels[i]->name()] =
        found.lookup(symbols[i]).getAddress().toPtr<HostKernelFn>();
  }
}

HostKernels::~HostKernels() = default;

HostKernelFn HostKernels::find(const std::string& name) const {
  const auto it = impl_->entries.find(name);
  return it == impl_->entries.end() ? nullptr : it->second;
}

std::string llvm_ir_text(const KernelDef& kernel, const std::string& sm) {
  if (!sm.empty()) return nvptx_ir_text(kernel, sm);
  auto jtmb = host_machine_builder();
  auto machine = take(jtmb.createTargetMachine(), "LLVM host target");
  llvm::LLVMContext context;
  llvm::Module module(kernel.name(), context);
  add_listed_kernel(module, *machine, kernel);
  std::string text;
  llvm::raw_string_ostream out(text);
  module.print(out, nullptr);
  return out.str();
}

const HostTarget& host_target() {
  static const HostTarget host = detect_host();
  return host;
}

bool HostTarget::has(const std::string& feature) const {
  return std::binary_search(features.begin(), features.end(), feature);
}

std::string host_assembly(const KernelDef& kernel) {
  auto jtmb = host_machine_builder();
  auto machine = take(jtmb.createTargetMachine(), "LLVM host target");
  llvm::LLVMContext context;
  llvm::Module module(kernel.name(), context);
  add_listed_kernel(module, *machine, kernel);
  const llvm::SmallVector<char, 0> text =
      emit(module, *machine, llvm::CodeGenFileType::AssemblyFile, "assembly");
  return std::string(text.begin(), text.end());
}

}  // namespace ampc::kernels::codegen
