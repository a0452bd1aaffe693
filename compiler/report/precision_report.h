// `ampc inspect MODEL.onnx --precision fp16 --precision-report`: every node with the dtype
// it computes in and the rule that decided it, the Casts autocast inserted with the bytes
// they move per step, and totals; as text and as JSON with the same content.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "passes/autocast.h"

namespace ampc::report {

// Keys: precision, nodes [{node, op, compute_dtype, rule}], casts [{node, value, from, to,
// numel, bytes_per_step, parameter}], totals {nodes, nodes_low, nodes_fp32, casts,
// parameter_casts, cast_bytes_per_step}, notes [..], loss_scaling (null until the
// loss-scaling pass reports here).
nlohmann::ordered_json precision_report_json(const passes::AutocastReport& report);
std::string precision_report_text(const passes::AutocastReport& report, const std::string& title);

}  // namespace ampc::report
