#include "tools/ampc/plan_inputs.h"

#include "base/error.h"
#include "runtime/stats/range_stats_log.h"

namespace ampc::cli {

PlanInputs plan_inputs(const plan::Plan& p) {
  PlanInputs result;
  result.batch = -1;
  for (const auto& binding : p.inputs()) {
    // The range statistics' switch is the trainer's, not the data's.
    if (binding.name() == rt::stats::kStatsEnabledInput) continue;
    const auto& b = p.buffers(binding.buffer());
    if (!b.shape_known() || b.shape_size() == 0) {
      throw Error("input '" + binding.name() + "' needs a static shape with a batch axis");
    }
    result.specs[binding.name()] = {static_cast<DType>(b.dtype()),
                                    {b.shape().begin() + 1, b.shape().end()}};
    if (result.batch >= 0 && result.batch != b.shape(0)) {
      throw Error("inputs disagree on the batch size (first axis): '" + binding.name() + "' has " +
                  std::to_string(b.shape(0)) + ", another input " + std::to_string(result.batch));
    }
    result.batch = b.shape(0);
  }
  if (result.batch < 0) throw Error("the plan has no inputs to feed with data");
  return result;
}

std::map<std::string, std::pair<DType, std::vector<int64_t>>> plan_input_types(
    const plan::Plan& p) {
  std::map<std::string, std::pair<DType, std::vector<int64_t>>> out;
  for (const auto& binding : p.inputs()) {
    if (binding.name() == rt::stats::kStatsEnabledInput) continue;
    const auto& b = p.buffers(binding.buffer());
    if (!b.shape_known()) throw Error("input '" + binding.name() + "' needs a static shape");
    out[binding.name()] = {static_cast<DType>(b.dtype()), {b.shape().begin(), b.shape().end()}};
  }
  return out;
}

}  // namespace ampc::cli
