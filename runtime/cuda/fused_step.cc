// Fused-kernel steps (op "FusedElementwise", domain "ampc.kernel") on the GPU: the plan's
// generated kernel launched over the step's buffers, once per segment of a multi-tensor step.
// Operand counts, element types and sizes are checked at load, as the CPU backend checks
// them (runtime/cpu/kernel_step.cc).
#include "kernels/codegen/instr_set.h"
#include "runtime/cuda/op_builders.h"
#include "runtime/cuda/ptx_library.h"

namespace ampc::rt::cuda {

using kernels::KernelDef;
using kernels::Operand;

Launch build_fused_kernel(StepContext& ctx) {
  const plan::Step& step = ctx.step();
  const std::string label = "fused kernel step '" + step.kernel() + "' (node '" +
                            (step.source_nodes_size() ? step.source_nodes(0) : "?") + "')";
  const KernelDef* def = nullptr;
  for (const auto& k : ctx.plan().kernels()) {
    if (k.name() == step.kernel()) def = &k;
  }
  if (!def) throw Error(label + ": the plan defines no kernel of that name");
  const int segments = std::max(1, step.segments());
  const int n_in = def->inputs_size(), n_out = def->outputs_size();
  if (step.inputs_size() != segments * n_in || step.outputs_size() != segments * n_out) {
    throw Error(label + ": " + std::to_string(step.inputs_size()) + " inputs and " +
                std::to_string(step.outputs_size()) + " outputs do not fit " +
                std::to_string(segments) + " segment(s) of the kernel");
  }
  int64_t shaped = 1;
  for (int64_t d : def->shape()) shaped *= d;
  struct Segment {
    std::vector<DevPtr> operands;
    int64_t count = 0;
  };
  std::vector<Segment> segs(static_cast<size_t>(segments));
  for (int seg = 0; seg < segments; ++seg) {
    Segment& s = segs[static_cast<size_t>(seg)];
    s.count = def->flat() ? ctx.out_numel(seg * n_out) : shaped;
    for (int j = 0; j < n_in; ++j) {
      const int k = seg * n_in + j;
      const plan::Buffer& b = ctx.input(k);
      const Operand& op = def->inputs(j);
      if (b.dtype() != op.dtype()) {
        throw Error(label + ": input " + std::to_string(k) + " " + describe_buffer(b) +
                    " is not of the kernel's type " +
                    std::string(dtype_name(static_cast<DType>(op.dtype()))));
      }
      const int64_t need = op.scalar()         ? 1
                           : op.strides_size() ? kernels::codegen::strided_extent(*def, op)
                                               : s.count;
      const int64_t have = ctx.in_numel(k);
      if (op.scalar() || op.strides_size() ? have < need : have != need) {
        throw Error(label + ": input " + std::to_string(k) + " " + describe_buffer(b) +
                    " does not fit the kernel's " + std::to_string(s.count) + " elements");
      }
      s.operands.push_back(ctx.in(k));
    }
    for (int o = 0; o < n_out; ++o) {
      const int k = seg * n_out + o;
      const plan::Buffer& b = ctx.output(k);
      if (b.dtype() != def->body(def->outputs(o)).dtype() || ctx.out_numel(k) != s.count) {
        throw Error(label + ": output " + std::to_string(k) + " " + describe_buffer(b) +
                    " does not fit the kernel");
      }
      s.operands.push_back(ctx.out(k));
    }
  }
  const cudaKernel_t kernel = ctx.handles().ptx->kernel(def->name());
  const int sms = ctx.device().sm_count;
  return [segs = std::move(segs), kernel, sms](cudaStream_t stream) {
    std::vector<void*> pointers;
    for (const Segment& s : segs) {
      pointers.clear();
      for (const DevPtr& p : s.operands) pointers.push_back(p.get());
      launch_generated(kernel, pointers, s.count, sms, stream);
    }
  };
}

}  // namespace ampc::rt::cuda
