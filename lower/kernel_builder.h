// A fusion group (lower/fusion.h) as a KernelDef (kernels/codegen/kernel.proto): each ONNX
// node becomes the instructions that compute exactly what the CPU backend's op computes
// (runtime/cpu/ops/elementwise_*.cc), so fused and unfused plans agree bit for bit.
#pragma once

#include <unordered_set>
#include <vector>

#include "ir/graph.h"
#include "kernels/codegen/kernel.pb.h"
#include "lower/fusion.h"

namespace ampc::lower {

struct LoweredKernel {
  kernels::KernelDef def;                 // without a name or code
  std::vector<const ir::Value*> inputs;   // the operands, in def.inputs order
  std::vector<const ir::Value*> outputs;  // the values stored, in def.outputs order
};

class KernelBuilder {
 public:
  // The model tells which initializers are constants (they may become `const` instructions)
  // and which are state or overridable graph inputs (always operands).
  explicit KernelBuilder(const ir::Model& model);

  // Throws ampc::Error naming the op and node for a node the instruction set cannot express
  // (fusion only groups nodes it can).
  LoweredKernel build(const FusionGroup& group) const;

 private:
  std::unordered_set<const ir::Value*> state_;
};

}  // namespace ampc::lower
