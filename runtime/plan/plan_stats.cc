#include "runtime/plan/plan_stats.h"

#include <set>
#include <vector>

#include <string>
#include "base/checked_size.h"
#include "base/dtype.h"
#include "ops/op_info.h"

namespace ampc::plan {

bool is_view_step(const Step& step) {
  return ops::op_info(step.domain(), step.op()).is_view();
}

int64_t count_kernels(const Plan& plan) {
  int64_t n = 0;
  for (const auto& s : plan.steps()) n += is_view_step(s) ? 0 : 1;
  return n;
}

int64_t buffer_bytes(const Buffer& b) {
  const size_t element = dtype_size(static_cast<DType>(b.dtype()));
  if (!b.shape_known() || element == 0 || !dtype_is_known(b.dtype())) return -1;
  std::vector<int64_t> shape(b.shape().begin(), b.shape().end());
  for (int64_t d : shape) {
    if (d < 0) return -1;
  }
  return checked_tensor_bytes(shape, element, "buffer '" + b.name() + "'");
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
