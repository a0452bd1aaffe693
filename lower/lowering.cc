#include "lower/lowering.h"

#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "kernels/codegen/codegen.h"
#include "lower/fusion.h"

namespace ampc::lower {
namespace {

namespace codegen = kernels::codegen;

// The CUDA architecture of a target ("sm_90"), empty for "cpu".
std::string cuda_arch(const std::string& target) {
  if (target == "cpu") return "";
  if (target == "cuda:sm_90" || target == "cuda:sm_80") return target.substr(5);
  throw Error("unknown target '" + target + "': expected cuda:sm_90, cuda:sm_80 or cpu");
}

// A transpose folded by several GEMMs as an operand disappears only when every reader of its
// output is a kept fold that folded it; otherwise it stays a step of its own (for the other
// readers), and the folds that read its input with a trans flag no longer count it as theirs.
void keep_shared_transposes(std::vector<GemmFold>& folds) {
  std::unordered_map<const ir::Node*, std::unordered_set<const ir::Node*>> folded_by;
  for (const auto& f : folds) {
    for (const ir::Node* n : f.folded) folded_by[n].insert(f.gemm);
  }
  auto all_readers_fold = [&](const ir::Node* n) {
    for (const ir::Value* v : n->outputs) {
      for (const ir::Use& u : v->uses) {
        if (!folded_by[n].count(u.node)) return false;
      }
    }
    return true;
  };
  for (auto& f : folds) {
    std::erase_if(f.folded, [&](const ir::Node* n) {
      const bool operand = n->inputs[0]->producer != f.gemm;  // not the call's result view
      return n->domain.empty() && n->op_type == "Transpose" && operand && !all_readers_fold(n);
    });
  }
}

// The folds whose GEMM step, in the schedule, comes after everything its inputs need and
// before every reader of its outputs (else the folded nodes simply run as steps of their
// own), moved into out.folds; returns each kept GEMM's index there.
std::unordered_map<const ir::Node*, int> kept_folds(const std::vector<FusionStep>& schedule,
                                                    std::vector<GemmFold>& folds, Lowering& out) {
  std::unordered_map<const ir::Node*, size_t> index;
  for (size_t i = 0; i < schedule.size(); ++i) {
    if (!schedule[i].fused()) index[schedule[i].node] = i;
    for (const auto& g : schedule[i].segments) {
      for (const ir::Node* n : g.nodes) index[n] = i;
    }
  }
  std::unordered_map<const ir::Node*, int> kept;
  for (auto& f : folds) {
    const size_t at = index.at(f.gemm);
    std::unordered_set<const ir::Node*> inside(f.folded.begin(), f.folded.end());
    inside.insert(f.gemm);
    bool ok = true;
    for (const ir::Value* v : f.inputs)
      ok &= !v || !v->producer || inside.count(v->producer) || index.at(v->producer) < at;
    for (const ir::Value* v : f.outputs) {
      for (const ir::Use& u : v->uses) ok &= inside.count(u.node) || index.at(u.node) > at;
    }
    if (!ok) continue;
    kept[f.gemm] = static_cast<int>(out.folds.size());
    out.folds.push_back(std::move(f));
  }
  keep_shared_transposes(out.folds);
  return kept;
}

// Kernels of equal structure are defined once: the index of `k`'s definition in out.kernels.
int define_kernel(const LoweredKernel& k, const std::string& key,
                  std::unordered_map<std::string, int>& kernel_of_key, Lowering& out) {
  auto [it, added] = kernel_of_key.emplace(key, static_cast<int>(out.kernels.size()));
  if (added) {
    kernels::KernelDef def = k.def;
    def.set_name("fused_" + std::to_string(out.kernels.size()));
    out.kernels.push_back(std::move(def));
  }
  return it->second;
}

// An elementwise node on its own, as a kernel of one member: on CUDA targets every float and
// bool elementwise op runs as generated code (the CUDA backend has no per-op kernels for them);
// on the CPU a 16-bit one does, as the generated code converts whole vectors where the CPU ops
// convert one element at a time, and so does one that broadcasts an operand, as the generated
// code walks short rows as one vectorised loop where the CPU ops set up each row
// (lower/README.md).
LoweredStep single_kernel_step(const ir::Node& n, const KernelBuilder& builder,
                               std::unordered_map<std::string, int>& kernel_of_key, Lowering& out) {
  LoweredStep step;
  LoweredKernel k = builder.build(group_of_one(n));
  step.kernel = define_kernel(k, codegen::structure_key(k.def), kernel_of_key, out);
  step.sources.push_back(&n);
  step.segments.push_back(std::move(k));
  return step;
}

bool sixteen_bit_result(const ir::Node& n) {
  const DType t = n.outputs.empty() || !n.outputs[0] ? DType::kUndefined : n.outputs[0]->type.dtype;
  return t == DType::kFloat16 || t == DType::kBFloat16;
}

// Whether the CPU runs fusible node `n` alone as a kernel of one member: a 16-bit result, or
// an operand that is broadcast (neither the output's size nor a scalar; a squeeze-excite's
// channel weights over small maps).
bool cpu_kernel_alone(const ir::Node& n) {
  if (sixteen_bit_result(n)) return true;
  const FusionGroup g = group_of_one(n);
  return !g.flat;
}

}  // namespace

Lowering lower_graph(const ir::Model& model, const LoweringOptions& options) {
  // An unknown target is refused before any work; CUDA targets run every fusible node as a
  // kernel, fused or not; fusing, the CPU runs so every fusible node with a 16-bit result or a
  // broadcast operand.
  const bool cuda = !cuda_arch(options.target).empty();
  Lowering out;
  const KernelBuilder builder(model);
  std::unordered_map<std::string, int> kernel_of_key;
  if (!options.fuse) {
    for (const auto& n : model.graph->nodes) {
      if (cuda && is_fusible(model, *n)) {
        out.steps.push_back(single_kernel_step(*n, builder, kernel_of_key, out));
        continue;
      }
      LoweredStep step;
      step.node = n.get();
      out.steps.push_back(std::move(step));
    }
    return out;
  }
  // Work the GEMM calls take over stays out of the elementwise groups.
  // Strided views only where oneDNN runs the GEMMs: cuBLASLt takes one batch stride.
  std::vector<GemmFold> folds =
      find_gemm_folds(model, {.strided_views = !cuda, .relu_after_bf16 = !cuda});
  std::unordered_set<const ir::Node*> foldable;
  for (const auto& f : folds) foldable.insert(f.folded.begin(), f.folded.end());
  FusionOptions fusion;
  fusion.structure_key = [&](const FusionGroup& g) {
    return codegen::structure_key(builder.build(g).def);
  };
  fusion.keep_unfused = [&](const ir::Node& n) { return foldable.count(&n) > 0; };
  const std::vector<FusionStep> schedule = fuse_elementwise(model, fusion);
  const std::unordered_map<const ir::Node*, int> fold_of = kept_folds(schedule, folds, out);
  std::unordered_set<const ir::Node*> folded;
  for (const auto& f : out.folds) folded.insert(f.folded.begin(), f.folded.end());
  for (const FusionStep& fs : schedule) {
    LoweredStep step;
    if (!fs.fused()) {
      if (folded.count(fs.node)) continue;  // runs inside its GEMM's step
      if (!fold_of.count(fs.node) && is_fusible(model, *fs.node) &&
          (cuda || cpu_kernel_alone(*fs.node))) {
        out.steps.push_back(single_kernel_step(*fs.node, builder, kernel_of_key, out));
        continue;
      }
      step.node = fs.node;
      if (auto it = fold_of.find(fs.node); it != fold_of.end()) step.fold = it->second;
      out.steps.push_back(std::move(step));
      continue;
    }
    std::string key;
    for (const FusionGroup& g : fs.segments) {
      LoweredKernel k = builder.build(g);
      std::string k_key = codegen::structure_key(k.def);
      if (step.segments.empty()) {
        key = std::move(k_key);
      } else if (k_key != key) {
        throw Error("internal: the segments of a multi-tensor kernel differ in structure (node " +
                    g.nodes[0]->label() + ")");
      }
      step.sources.insert(step.sources.end(), g.nodes.begin(), g.nodes.end());
      for (size_t o = 0; o < g.guarded_states.size(); ++o)
        step.aliases.emplace_back(g.outputs[o], g.guarded_states[o]);
      step.segments.push_back(std::move(k));
    }
    step.kernel = define_kernel(step.segments[0], key, kernel_of_key, out);
    out.steps.push_back(std::move(step));
  }
  return out;
}

void attach_ptx(Lowering& lowering, const std::string& target) {
  const std::string arch = cuda_arch(target);
  if (arch.empty()) return;
  std::vector<const kernels::KernelDef*> defs;
  for (const auto& k : lowering.kernels) defs.push_back(&k);
  std::vector<kernels::TargetCode> codes = codegen::emit_ptx_all(defs, arch);
  for (size_t i = 0; i < codes.size(); ++i) *lowering.kernels[i].add_code() = std::move(codes[i]);
}

}  // namespace ampc::lower
