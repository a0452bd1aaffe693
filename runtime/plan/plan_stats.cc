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

OutputCopies output_copies(const Plan& plan) {
  OutputCopies c;
  c.after_step.resize(static_cast<size_t>(plan.steps_size()));
  for (int k = 0; k < plan.outputs_size(); ++k) {
    int writer = -1;
    for (int i = 0; i < plan.steps_size(); ++i) {
      for (int id : plan.steps(i).outputs()) writer = id == plan.outputs(k).buffer() ? i : writer;
    }
    if (writer >= 0) {
      c.after_step[static_cast<size_t>(writer)].push_back(k);
    } else {
      c.at_end.push_back(k);
    }
  }
  return c;
}

}  // namespace ampc::plan
