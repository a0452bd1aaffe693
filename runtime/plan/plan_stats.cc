#include "runtime/plan/plan_stats.h"

#include <set>
#include <string>

namespace ampc::plan {

bool is_view_step(const Step& step) {
  static const std::set<std::string> views = {"Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                              "Identity"};
  return step.domain().empty() && views.count(step.op()) > 0;
}

int64_t count_kernels(const Plan& plan) {
  int64_t n = 0;
  for (const auto& s : plan.steps()) n += is_view_step(s) ? 0 : 1;
  return n;
}

}  // namespace ampc::plan
