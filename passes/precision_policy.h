// The precision policy: which class each ONNX op of the default domain belongs to
// (../shared/amp-semantics.md section 2, the precision column of ops/op_table.cc), with the
// user's overrides (--allow/--deny/--follow/--keep-fp32/--policy) applied on top.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/op_info.h"
#include "passes/autocast.h"

namespace ampc::passes {

// ALLOW: compute in the low dtype, float inputs cast down; DENY: fp32, float inputs cast up;
// FOLLOW: the widest dtype of the float inputs; KEEP: untouched (explicit Casts, other
// domains, subgraph-carrying ops). The table's classes are the ops' (ops/op_info.h).
using OpClass = ops::Precision;

std::string_view op_class_name(OpClass c);  // "ALLOW", "DENY", "FOLLOW", "KEEP"

struct PolicyDecision {
  OpClass op_class;
  std::string rule;  // why: "ALLOW (table)", "DENY (--deny MatMul)", "fp32 (--keep-fp32 'x*')"
};

class PrecisionPolicy {
 public:
  // Reads options.policy_file (if any) and checks every override: an op that is not an
  // operator of the default ONNX domain, or one listed in two classes, is an ampc::Error
  // naming it.
  explicit PrecisionPolicy(const AutocastOptions& options);

  // The class of a node; nodes pinned by a --keep-fp32 pattern are DENY with that rule, and
  // so are the nodes of a lowering PyTorch's autocast computes in fp32 (pin_lowerings) and
  // those of a region the forward ran with autocast disabled (pin_autocast_disabled).
  PolicyDecision classify(const ir::Node& node) const;

  // The model's fp32 lowerings (ir::Model::fp32_lowerings) pinned to fp32.
  void pin_lowerings(const std::vector<ir::Model::Fp32Lowering>& lowerings) {
    lowerings_ = lowerings;
  }

  // Node-name glob patterns of the forward's torch.autocast(enabled=False) regions
  // (kAutocastDisabledKey) pinned to fp32.
  void pin_autocast_disabled(const std::vector<std::string>& patterns) {
    autocast_disabled_ = patterns;
  }

  // The class the table gives an op type of the default domain (no overrides).
  static OpClass table_class(const std::string& op_type);

 private:
  std::map<std::string, PolicyDecision> overrides_;  // op type -> forced class and its rule
  std::vector<std::string> keep_fp32_;
  std::vector<ir::Model::Fp32Lowering> lowerings_;
  std::vector<std::string> autocast_disabled_;
};

}  // namespace ampc::passes
