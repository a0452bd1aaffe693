// Step helpers of the CPU elementwise and tensor-op tests (see step_test_helpers.h).
#include "tests/unit/step_test_helpers.h"

#include <gtest/gtest.h>

#include "lower/legalize.h"
#include "runtime/cpu/op_registry.h"

namespace ampc::rt::cpu::testing {

// Helpers shared with cpu_tensor_ops_test.cc (declared there).

void set_int(plan::Step& s, const std::string& name, int64_t v) {
  auto* a = s.add_attributes();
  a->set_name(name);
  a->set_i(v);
}
void set_float(plan::Step& s, const std::string& name, float v) {
  auto* a = s.add_attributes();
  a->set_name(name);
  a->set_f(v);
}
void set_ints(plan::Step& s, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = s.add_attributes();
  a->set_name(name);
  for (int64_t x : v) a->mutable_ints()->add_v(x);
}
void set_string(plan::Step& s, const std::string& name, const std::string& v) {
  auto* a = s.add_attributes();
  a->set_name(name);
  a->set_s(v);
}

// Runs `op` (default domain, given opset) on `inputs` (null = omitted) with `num_outputs`
// outputs; attributes are set by `attrs`.
std::vector<Tensor> run_op(const std::string& op, const std::vector<const Tensor*>& inputs,
                           int num_outputs, const AttrFn& attrs, int64_t opset) {
  plan::Step step;
  step.set_op(op);
  step.add_source_nodes("n_" + op);
  step.set_opset_version(opset);
  if (attrs) attrs(step);
  lower::legalize_for_tensors(step, inputs, num_outputs);  // as plan emission does
  std::vector<Tensor> outs(static_cast<size_t>(num_outputs));
  std::vector<Tensor*> out_ptrs;
  for (auto& t : outs) out_ptrs.push_back(&t);
  OpContext ctx(step, inputs, out_ptrs);
  const CpuOp* fn = OpRegistry::instance().find(op, "");
  if (!fn) throw Error("no CPU kernel for " + op);
  (*fn)(ctx);
  return outs;
}

}  // namespace ampc::rt::cpu::testing
