// LLVM set-up shared by the back ends: target registration and the optimisation pipeline.
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>

#include <mutex>

#include "base/error.h"
#include "kernels/codegen/ir_builder.h"

extern "C" {
// NVPTX's registration functions (not covered by TargetSelect.h's native-target helpers).
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace ampc::kernels::codegen {

void initialize_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (llvm::InitializeNativeTarget() || llvm::InitializeNativeTargetAsmPrinter()) {
      throw Error("LLVM has no code generator for this host CPU");
    }
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

void optimize_module(llvm::Module& module, llvm::TargetMachine& machine, int level) {
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  tuning.LoopUnrolling = true;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // With the target machine the builder registers its callbacks (NVPTX: NVVMReflect) and
  // the cost model the vectoriser asks.
  llvm::PassBuilder pb(&machine, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  const llvm::OptimizationLevel opt =
      level >= 3 ? llvm::OptimizationLevel::O3 : llvm::OptimizationLevel::O2;
  pb.buildPerModuleDefaultPipeline(opt).run(module, mam);
}

}  // namespace ampc::kernels::codegen
