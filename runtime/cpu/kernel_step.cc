#include "runtime/cpu/kernel_step.h"

#include "base/error.h"
#include "kernels/codegen/instr_set.h"
#include "kernels/cpu/elementwise.h"

namespace ampc::rt::cpu {
namespace {

using kernels::KernelDef;
using kernels::Operand;

std::string type_name(int32_t dtype) {
  return std::string(dtype_name(static_cast<DType>(dtype)));
}

}  // namespace

bool is_kernel_step(const plan::Step& step) {
  return step.domain() == "ampc.kernel" && step.op() == "FusedElementwise";
}

KernelSteps::KernelSteps(const plan::Plan& plan) {
  if (plan.kernels_size() == 0) return;
  std::vector<const KernelDef*> defs;
  for (const auto& k : plan.kernels()) defs.push_back(&k);
  host_ = std::make_unique<kernels::codegen::HostKernels>(defs);
}

KernelSteps::~KernelSteps() = default;

KernelCall KernelSteps::resolve(const plan::Plan& plan, const plan::Step& step) const {
  const std::string label = "fused kernel step '" + step.kernel() + "' (node '" +
                            (step.source_nodes_size() ? step.source_nodes(0) : "?") + "')";
  KernelCall call;
  call.label = label;
  for (const auto& k : plan.kernels()) {
    if (k.name() == step.kernel()) call.def = &k;
  }
  if (!call.def || !host_) throw Error(label + ": the plan defines no kernel of that name");
  call.fn = host_->find(step.kernel());
  if (!call.fn) throw Error(label + ": the kernel was not compiled");
  const KernelDef& def = *call.def;
  call.segments = std::max(1, step.segments());
  if (step.inputs_size() != call.segments * def.inputs_size() ||
      step.outputs_size() != call.segments * def.outputs_size()) {
    throw Error(label + ": " + std::to_string(step.inputs_size()) + " inputs and " +
                std::to_string(step.outputs_size()) + " outputs do not fit " +
                std::to_string(call.segments) + " segment(s) of a kernel with " +
                std::to_string(def.inputs_size()) + " inputs and " +
                std::to_string(def.outputs_size()) + " outputs");
  }
  auto check = [&](int id, int32_t dtype, const std::string& what) {
    if (id < 0 || id >= plan.buffers_size()) throw Error(label + ": " + what + " has no buffer");
    const auto& b = plan.buffers(id);
    if (b.dtype() != dtype) {
      throw Error(label + ": " + what + " '" + b.name() + "' is " + type_name(b.dtype()) +
                  " but the kernel takes " + type_name(dtype));
    }
  };
  for (int j = 0; j < step.inputs_size(); ++j) {
    check(step.inputs(j), def.inputs(j % def.inputs_size()).dtype(), "input " + std::to_string(j));
  }
  for (int o = 0; o < step.outputs_size(); ++o) {
    const int instr = def.outputs(o % def.outputs_size());
    check(step.outputs(o), def.body(instr).dtype(), "output " + std::to_string(o));
    if (!plan.buffers(step.outputs(o)).shape_known())
      throw Error(label + ": output " + std::to_string(o) + " has no static shape");
  }
  return call;
}

void run_kernel_step(const KernelCall& call, const std::vector<const Tensor*>& inputs,
                     const std::vector<Tensor*>& outputs) {
  const KernelDef& def = *call.def;
  const std::string& label = call.label;
  const int n_in = def.inputs_size(), n_out = def.outputs_size();
  int64_t shaped = 1;
  for (int64_t d : def.shape()) shaped *= d;
  // Per segment its element count and operands (inputs, then outputs).
  std::vector<int64_t> sizes(static_cast<size_t>(call.segments));
  std::vector<std::vector<void*>> operands(static_cast<size_t>(call.segments),
                                           std::vector<void*>(static_cast<size_t>(n_in + n_out)));
  for (int seg = 0; seg < call.segments; ++seg) {
    const int64_t n = def.flat() ? outputs[seg * n_out]->numel() : shaped;
    std::vector<void*>& ops = operands[static_cast<size_t>(seg)];
    // The generated code trusts its operands' sizes: check them once per call.
    for (int o = 0; o < n_out; ++o) {
      Tensor* t = outputs[seg * n_out + o];
      if (t->numel() != n) {
        throw Error(label + ": output " + std::to_string(o) + " is " + t->type_str() + ", not " +
                    std::to_string(n) + " elements");
      }
      ops[n_in + o] = t->raw();
    }
    for (int j = 0; j < n_in; ++j) {
      const Tensor* t = inputs[seg * n_in + j];
      const Operand& op = def.inputs(j);
      const int64_t need = op.scalar()         ? 1
                           : op.strides_size() ? kernels::codegen::strided_extent(def, op)
                                               : n;
      const bool ok = op.scalar() || op.strides_size() ? t->numel() >= need : t->numel() == need;
      if (!ok) {
        throw Error(label + ": input " + std::to_string(j) + " is " + t->type_str() +
                    ", too small for the kernel's " + std::to_string(n) + " elements");
      }
      ops[j] = const_cast<void*>(t->raw());
    }
    sizes[static_cast<size_t>(seg)] = n;
  }
  // All segments in one parallel region: a multi-tensor optimizer step has one per parameter.
  kernels::cpu::parallel_segments(sizes, [&](int64_t seg, int64_t begin, int64_t end) {
    call.fn(operands[static_cast<size_t>(seg)].data(), begin, end);
  });
}

}  // namespace ampc::rt::cpu
