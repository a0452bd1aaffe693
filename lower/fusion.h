// Elementwise fusion: a schedule of the final graph in which chains and siblings of
// elementwise nodes of one iteration shape form groups that run as one generated kernel
// (lower/ builds the kernels), and independent groups of identical structure run as
// one multi-tensor kernel. The IR is not changed (it stays exportable to ONNX); the schedule
// only points into it, so it is valid while the model is.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace ampc::lower {

// Nodes that compute as one kernel over one iteration shape (every member's output shape).
struct FusionGroup {
  std::vector<const ir::Node*> nodes;     // members, in graph order
  std::vector<const ir::Value*> inputs;   // read from outside the group, distinct, first use
  std::vector<const ir::Value*> outputs;  // read outside, graph outputs, state-update sources
  std::vector<int64_t> shape;             // iteration shape
  // Every input is the iteration shape or one element: the kernel is shape-generic.
  bool flat = false;
  // Skip-step guard: every output is Where(guard, state, new) of the STATE value it becomes,
  // nothing after the group reads that state, so the kernel computes `new` straight into the
  // state (guarded_states[k] for output k) and writes nothing when `guard` (a scalar bool
  // input) is true. Null: no guard.
  const ir::Value* guard = nullptr;
  // The states the outputs are computed into, in place (output k into guarded_states[k]):
  // those of the guard, or, without a guard, when every output is the new value of a STATE
  // (an optimizer update without a skip-step) that nothing reads after the group. Empty:
  // every output gets a buffer of its own.
  std::vector<const ir::Value*> guarded_states;
};

// One step of the schedule: an unfused node, or a fused kernel over one group or over the N
// groups (segments) of a multi-tensor kernel.
struct FusionStep {
  const ir::Node* node = nullptr;
  std::vector<FusionGroup> segments;
  bool fused() const { return node == nullptr; }
};

struct FusionOptions {
  // The structure of a flat group's kernel (codegen::structure_key of its KernelDef): flat
  // groups with equal keys and no path between them become one multi-tensor step. Null: no
  // multi-tensor steps.
  std::function<std::string(const FusionGroup&)> structure_key;
  // Nodes to leave out of every group (the work lowering folds into GEMM calls); null: none.
  std::function<bool(const ir::Node&)> keep_unfused;
};

// Whether a node can be a member of a group: an elementwise op the kernel instruction set
// expresses exactly (kernels/codegen/README.md), on f16/bf16/f32/f64/bool, with a static
// output shape to which every input broadcasts unidirectionally, with the numpy broadcasting
// of `model`'s opset (a PRelu before opset 7 reads a 1-D slope per channel: left unfused).
bool is_fusible(const ir::Model& model, const ir::Node& node);

// The group of `node` alone (a fusible node; see is_fusible): how a CUDA target runs an
// elementwise node that fusion left on its own, since the CUDA backend's elementwise ops are
// the generated kernels.
FusionGroup group_of_one(const ir::Node& node);

// The schedule of every node of the model's graph, in an order valid for execution. A group
// of one node that is not part of a multi-tensor step stays an unfused step.
std::vector<FusionStep> fuse_elementwise(const ir::Model& model, const FusionOptions& options = {});

}  // namespace ampc::lower
