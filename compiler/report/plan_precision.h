// The precision report of what the compiler produced: a plan (`ampc inspect MODEL.plan
// --precision-report`), or an ONNX model ampc exported, lowered to a plan first. Dtypes come
// from the buffers each step reads and writes, rules from Plan.precision_decisions (what
// autocast recorded at compile time), and the loss-scaling subgraph from the ampc ops and the
// amp.* values of passes/loss_scaling.h.
#pragma once

#include "compiler/report/precision_report.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::report {

enum class PlanOrigin {
  kPlan,   // a plan file: steps without a recorded decision were not autocast's
  kModel,  // an ONNX model lowered for the report: no decisions, the rule is "as exported"
};

PrecisionReport plan_precision_report(const plan::Plan& plan, PlanOrigin origin);

}  // namespace ampc::report
