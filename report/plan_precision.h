// The precision report of what the compiler produced: a plan (`ampc inspect MODEL.plan
// --precision-report`), or an ONNX model ampc exported, lowered to a plan first. Dtypes come
// from the buffers each step reads and writes, rules from Plan.precision_decisions (what
// autocast recorded at compile time), and the loss-scaling subgraph from the ampc ops and the
// buffers the plan's training signature names.
#pragma once

#include <string>

#include "report/precision_report.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::report {

enum class PlanOrigin {
  kPlan,   // a plan file: steps without a recorded decision were not autocast's
  kModel,  // an ONNX model lowered for the report: no decisions, the rule is "as exported"
};

PrecisionReport plan_precision_report(const plan::Plan& plan, PlanOrigin origin);

// Whether the buffer `name` is the loss scaler's state, as the training signature names it.
bool is_scaler_state(const plan::Plan& plan, const std::string& name);

// The report of a lowered plan (fused kernels, folded GEMM epilogues), stored in it at compile
// time (Plan.precision_report) as JSON: made from the same graph lowered one step per node
// (`unfused`), with every node's step renumbered to the step of `lowered` that computes it.
std::string lowered_precision_report(const plan::Plan& unfused, const plan::Plan& lowered);

// A plan's report: the stored one when the plan has it, else plan_precision_report.
PrecisionReport precision_report_of_plan(const plan::Plan& plan);

}  // namespace ampc::report
