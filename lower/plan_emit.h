// IR -> plan: one buffer per value (but those internal to a fused kernel), one step per
// node or per fused kernel (lower/), constants with their data, bindings for the
// graph's inputs and outputs, and each step's ONNX node names.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "ir/graph.h"
#include "lower/lowering.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::lower {

// A fused kernel's step: op and domain (Step.kernel names its KernelDef).
inline constexpr const char* kFusedOp = "FusedElementwise";
inline constexpr const char* kKernelDomain = "ampc.kernel";

struct EmitOptions {
  std::string model_name;
  // Recorded in the plan as the options it was compiled with.
  std::map<std::string, std::string> recorded_options;
  // The steps to emit and the kernels they run; null: one step per node, in graph order.
  const Lowering* lowering = nullptr;
  // A training plan's signature (driver/training_signature.h), copied into the plan.
  std::optional<plan::TrainingSignature> training;
};

plan::Plan emit_plan(const ir::Model& model, const EmitOptions& options);

}  // namespace ampc::lower
