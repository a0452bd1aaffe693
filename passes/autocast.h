// Autocast: the precision policy applied to the forward graph before differentiation
// (../shared/amp-semantics.md section 2). Precision and user overrides live here; the
// policy table is in precision_policy.*, the pass in autocast.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "ir/graph.h"

namespace ampc::passes {

enum class Precision { kFP32, kFP16, kBF16 };

// "fp32" | "fp16" | "bf16"; parse_precision throws ampc::Error on anything else.
std::string_view precision_name(Precision p);
Precision parse_precision(std::string_view name);
// The storage dtype of the low precision (fp32 for kFP32).
DType precision_dtype(Precision p);

// The ONNX metadata key under which ampc's exporter (python/ampc/_autocast_regions.py) lists
// node-name glob patterns of the parts a PyTorch forward ran under torch.autocast(...,
// enabled=False): PyTorch computes them in their inputs' dtype, fp32 as such code casts them
// (`.float()`), so autocast keeps them in fp32.
inline constexpr const char* kAutocastDisabledKey = "ampc.autocast_disabled";

struct AutocastOptions {
  Precision precision = Precision::kFP32;
  std::vector<std::string> allow;      // op types moved to ALLOW (--allow OP)
  std::vector<std::string> deny;       // ... to DENY (--deny OP)
  std::vector<std::string> follow;     // ... to FOLLOW (--follow OP)
  std::vector<std::string> keep_fp32;  // node-name glob patterns pinned to fp32 (--keep-fp32)
  // A JSON file with the same overrides (--policy FILE.json, format in
  // docs/mixed-precision.md); merged with the lists above by PrecisionPolicy.
  std::string policy_file;
};

// What autocast decided, for `ampc inspect --precision-report` and tests.
struct AutocastReport {
  struct NodeDecision {
    std::string node;  // Node::label()
    std::string op_type;
    DType compute_dtype;  // kUndefined for nodes without float math (integer/shape ops)
    std::string rule;     // "ALLOW (table)", "DENY (--deny Softmax)", "--keep-fp32 'enc*'", ...
  };
  struct InsertedCast {
    std::string node;   // the Cast node's name
    std::string value;  // the value cast
    DType from;
    DType to;
    int64_t numel;        // -1 when the shape is not static
    int64_t bytes_moved;  // per step: numel x (in bytes + out bytes); -1 when unknown
    bool parameter;       // the value is an fp32 master weight
  };
  std::string precision;  // "fp16" / "bf16"
  std::vector<NodeDecision> nodes;
  std::vector<InsertedCast> casts;
  std::vector<std::string> notes;  // e.g. BatchNormalization kept fp32 below opset 15

  int64_t total_cast_bytes() const;  // sum of the known bytes_moved
};

// Rewrites the forward graph of `model` for options.precision (a no-op report for fp32):
// compute dtype per node by the policy, one Cast per (value, dtype) shared by all
// consumers, fp32 master parameters, fp32 graph outputs, graph inputs as declared.
// Throws ampc::Error for an override naming an unknown op.
AutocastReport apply_autocast(ir::Model& model, const AutocastOptions& options);

}  // namespace ampc::passes
