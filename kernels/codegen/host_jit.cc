// The host back end: a plan's kernels in one module, optimised for this CPU (O2, vectorised)
// and compiled once through ORC LLJIT. The C library's math functions are resolved from the
// process, so they are the very ones the CPU ops call.
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <thread>
#include <unordered_map>

#include "base/error.h"
#include "kernels/codegen/codegen.h"
#include "kernels/codegen/ir_builder.h"

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

// The host machine, without mul+add contraction so that both targets round alike.
llvm::orc::JITTargetMachineBuilder host_machine_builder() {
  initialize_llvm();
  auto jtmb = take(llvm::orc::JITTargetMachineBuilder::detectHost(), "LLVM host detection");
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
  jtmb.getOptions().AllowFPOpFusion = llvm::FPOpFusion::Strict;
  return jtmb;
}

}  // namespace

struct HostKernels::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unordered_map<std::string, HostKernelFn> entries;
};

HostKernels::HostKernels(const std::vector<const KernelDef*>& kernels)
    : impl_(std::make_unique<Impl>()) {
  if (kernels.empty()) return;
  // The kernels go into `chunks` modules, optimised and compiled in parallel by the JIT's
  // compile threads (one module per thread; each has its own LLVMContext).
  const size_t threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  const size_t chunks = std::min(kernels.size(), threads);
  auto jtmb = host_machine_builder();
  impl_->jit = take(llvm::orc::LLJITBuilder()
                        .setJITTargetMachineBuilder(jtmb)
                        .setNumCompileThreads(chunks > 1 ? static_cast<unsigned>(chunks) : 0)
                        .create(),
                    "LLVM JIT");
  llvm::orc::LLJIT& jit = *impl_->jit;
  // The session reports errors of its worker threads here instead of printing them: those
  // of compilation surface through the lookup below anyway, and those of the teardown (a
  // resource tracker of a finished module going away while a worker winds down, when the
  // process exits right after loading a plan) say nothing about the kernels.
  jit.getExecutionSession().setErrorReporter(
      [](llvm::Error error) { llvm::consumeError(std::move(error)); });
  // Optimisation runs as the JIT's IR transform, on the thread compiling the module, with a
  // target machine of its own (TargetMachine is not safe to share between threads).
  jit.getIRTransformLayer().setTransform(
      [jtmb](llvm::orc::ThreadSafeModule tsm, const llvm::orc::MaterializationResponsibility&)
          -> llvm::Expected<llvm::orc::ThreadSafeModule> {
        auto builder = jtmb;
        auto machine = builder.createTargetMachine();
        if (!machine) return machine.takeError();
        tsm.withModuleDo([&](llvm::Module& m) { optimize_module(m, **machine, 2); });
        return tsm;
      });
  jit.getMainJITDylib().addGenerator(
      take(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
               jit.getDataLayout().getGlobalPrefix()),
           "LLVM process symbols"));
  // Kernel names may be anything (even "exp"): the modules' symbols are numbered instead.
  llvm::orc::SymbolLookupSet lookup;
  std::vector<std::pair<std::string, llvm::orc::SymbolStringPtr>> symbols;
  const std::string triple = jtmb.getTargetTriple().str();
  for (size_t c = 0; c < chunks; ++c) {
    auto context = std::make_unique<llvm::LLVMContext>();
    auto module = std::make_unique<llvm::Module>("ampc_host_kernels", *context);
    module->setDataLayout(jit.getDataLayout());
    module->setTargetTriple(triple);
    for (size_t i = c; i < kernels.size(); i += chunks) {
      const std::string& name = kernels[i]->name();
      if (!impl_->entries.emplace(name, nullptr).second) {
        throw Error("two kernels are named '" + name + "'");
      }
      const std::string symbol = "ampc_kernel_" + std::to_string(i);
      add_kernel(*module, *kernels[i], symbol, Target::kHost);
      symbols.emplace_back(name, jit.mangleAndIntern(symbol));
      lookup.add(symbols.back().second);
    }
    check(jit.addIRModule(llvm::orc::ThreadSafeModule(std::move(module), std::move(context))),
          "LLVM JIT");
  }
  // One lookup of every entry: the modules compile concurrently.
  const auto found =
      take(jit.getExecutionSession().lookup(
               llvm::orc::makeJITDylibSearchOrder(&jit.getMainJITDylib()), std::move(lookup)),
           "LLVM JIT compilation");
  for (const auto& [name, symbol] : symbols) {
    impl_->entries[name] = found.lookup(symbol).getAddress().toPtr<HostKernelFn>();
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
  module.setDataLayout(machine->createDataLayout());
  module.setTargetTriple(machine->getTargetTriple().str());
  // Prefixed: a kernel named like a C library function ("exp") must not shadow it.
  add_kernel(module, kernel, "ampc_" + kernel.name(), Target::kHost);
  optimize_module(module, *machine, 2);
  std::string text;
  llvm::raw_string_ostream out(text);
  module.print(out, nullptr);
  return out.str();
}

}  // namespace ampc::kernels::codegen
