#include "passes/cpu_evaluation.h"

#include <cstring>
#include <new>

#include "base/error.h"
#include "lower/plan_convert.h"
#include "runtime/cpu/op_context.h"
#include "runtime/cpu/op_registry.h"

namespace ampc::passes {
namespace {

// Through the plan's constant form, as the CPU backend loads a plan's constants.
rt::Tensor to_runtime(const ir::Tensor& t) {
  plan::TensorData data;
  lower::plan_tensor_data(t, &data);
  return rt::cpu::tensor_from_data(data);
}

ir::Tensor to_ir(const rt::Tensor& t) {
  ir::Tensor out;
  out.dtype = t.dtype();
  out.dims = t.shape();
  if (t.dtype() == DType::kString) {
    out.strings = t.strings();
  } else {
    const auto* p = static_cast<const uint8_t*>(t.raw());
    out.bytes.assign(p, p + t.nbytes());
  }
  return out;
}

// A tensor of the static shape of `type` that has no data: an op that reads only its input's
// shape never touches the storage, which is one byte whatever the shape says (a shape's
// values, not a tensor of that size, is what folding Shape needs).
rt::Tensor shape_stand_in(const ir::TensorType& type) {
  static uint8_t no_data = 0;
  return rt::Tensor::borrowed(DType::kUInt8, *type.shape, &no_data);
}

rt::Tensor input_tensor(const ir::Value& v, CpuInputs inputs) {
  return inputs == CpuInputs::kShapesOnly ? shape_stand_in(v.type) : to_runtime(*v.initializer);
}

// The caller's side of the contract (cpu_evaluation.h), checked outside the evaluation so
// that a mistake there is not taken for an op that fails.
void check_inputs(const ir::Node& n, CpuInputs inputs) {
  for (const ir::Value* v : n.inputs) {
    if (!v) continue;
    const bool ok = inputs == CpuInputs::kShapesOnly ? v->type.is_static() : !!v->initializer;
    if (!ok) {
      throw Error("internal: evaluating node " + n.label() + " on input '" + v->name + "', " +
                  (inputs == CpuInputs::kShapesOnly ? "whose shape is unknown" : "not a constant"));
    }
  }
}

// The node as a step of its own, as plan emission writes it.
plan::Step one_node_step(const ir::Node& n, int64_t opset) {
  plan::Step step;
  step.set_op(n.op_type);
  step.set_domain(n.domain);
  step.set_opset_version(opset);
  step.add_source_nodes(n.name);
  for (const auto& a : n.attributes) lower::plan_attribute(a, n, step.add_attributes());
  for (const ir::Value* v : n.outputs) step.add_outputs(v ? 0 : -1);  // which outputs exist
  lower::legalize_with_values(step, {n.inputs.begin(), n.inputs.end()});
  return step;
}

std::vector<ir::Tensor> run(const rt::cpu::CpuOp& op, const ir::Node& n, int64_t opset,
                            CpuInputs inputs) {
  const plan::Step step = one_node_step(n, opset);
  std::vector<rt::Tensor> in(n.inputs.size());
  std::vector<const rt::Tensor*> in_ptrs;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (n.inputs[k]) in[k] = input_tensor(*n.inputs[k], inputs);
    in_ptrs.push_back(n.inputs[k] ? &in[k] : nullptr);
  }
  std::vector<rt::Tensor> out(n.outputs.size());
  std::vector<rt::Tensor*> out_ptrs;
  for (auto& t : out) out_ptrs.push_back(&t);
  rt::cpu::OpContext ctx(step, std::move(in_ptrs), std::move(out_ptrs));
  op(ctx);
  std::vector<ir::Tensor> values;
  for (const rt::Tensor& t : out) {
    if (!t.defined()) throw Error("internal: node " + n.label() + " left an output unwritten");
    values.push_back(to_ir(t));
  }
  return values;
}

}  // namespace

std::optional<std::vector<ir::Tensor>> evaluate_on_cpu(const ir::Node& n, int64_t opset,
                                                       CpuInputs inputs) {
  for (const ir::Value* v : n.outputs) {
    if (!v) return std::nullopt;
  }
  const rt::cpu::CpuOp* op = rt::cpu::OpRegistry::instance().find(n.op_type, n.domain);
  if (!op) return std::nullopt;
  check_inputs(n, inputs);
  try {
    return run(*op, n, opset, inputs);
  } catch (const Error&) {
    return std::nullopt;
  } catch (const std::bad_alloc&) {
    return std::nullopt;
  }
}

}  // namespace ampc::passes
