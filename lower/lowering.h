// Lowering of the final graph into what the plan's steps run: the fusion schedule
// (lower/fusion.h) with each fused step's kernel built (kernel_builder.h), every distinct
// kernel defined once, and its PTX for CUDA targets.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "kernels/codegen/kernel.pb.h"
#include "lower/gemm_epilogue.h"
#include "lower/kernel_builder.h"

namespace ampc::lower {

struct LoweringOptions {
  // Elementwise fusion into generated kernels (lower/fusion.h); off: one step per node.
  bool fuse = true;
  // "cuda:sm_90", "cuda:sm_80" (PTX of every kernel stored in the plan) or "cpu" (none).
  // Every plan runs on the CPU backend, which compiles its kernels for the host at load.
  std::string target = "cuda:sm_90";
};

// One plan step: an unfused node, or a fused kernel over one or more segments.
struct LoweredStep {
  const ir::Node* node = nullptr;
  int fold = -1;                         // a GEMM node with folded work: index into Lowering::folds
  int kernel = -1;                       // index into Lowering::kernels
  std::vector<LoweredKernel> segments;   // operands and outputs of each application
  std::vector<const ir::Node*> sources;  // every member node, in order
  // Outputs written in place into the state they update (a guarded kernel): output -> state.
  std::vector<std::pair<const ir::Value*, const ir::Value*>> aliases;
};

struct Lowering {
  std::vector<kernels::KernelDef> kernels;  // named "fused_N"; PTX attached for CUDA targets
  std::vector<LoweredStep> steps;           // in execution order
  std::vector<GemmFold> folds;              // GEMM epilogues and transposes, as emitted
};

// The schedule and the kernels, without code. Throws ampc::Error for an unknown target.
Lowering lower_graph(const ir::Model& model, const LoweringOptions& options);

// The PTX of every kernel for a CUDA target (TargetCode), generated in parallel; nothing for
// "cpu".
void attach_ptx(Lowering& lowering, const std::string& target);

}  // namespace ampc::lower
