#include "runtime/cuda/op_builders.h"

#include <memory>

#include "ops/op_info.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/plan/plan_stats.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cuda {
namespace {

Launch build_view(StepContext& ctx) {
  // The memory plan puts a view in its input's storage, so nothing moves; when it does not,
  // a view is the same bytes in another shape: one device-to-device copy.
  const DevPtr in = ctx.in(0), out = ctx.out(0);
  const int64_t bytes = ctx.out_numel(0) * static_cast<int64_t>(dtype_size(ctx.out_dtype(0)));
  if (ctx.in_numel(0) != ctx.out_numel(0) || ctx.in_dtype(0) != ctx.out_dtype(0))
    ctx.fail("a view's output must have its input's type and element count");
  return [in, out, bytes](cudaStream_t stream) {
    void* dst = out.get();
    const void* src = in.get();
    if (dst == src || bytes == 0) return;
    check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream),
          "copying a view");
  };
}

const BuilderTable& table() {
  static const BuilderTable t = [] {
    BuilderTable t;
    t.add("ampc.kernel", "FusedElementwise", build_fused_kernel);
    for (const ops::OpInfo& info : ops::all_op_infos())
      if (info.is_view()) t.add(std::string(info.domain), std::string(info.op), build_view);
    register_gemm_ops(t);
    register_conv_ops(t);
    register_nn_ops(t);
    register_tensor_ops(t);
    register_comm_ops(t);
    register_random_ops(t);
    return t;
  }();
  return t;
}

}  // namespace

void BuilderTable::add(const std::string& domain, const std::string& op, Builder b) {
  entries_.add({domain, op}, b);
}

Builder BuilderTable::find(const std::string& domain, const std::string& op) const {
  const Builder* b = entries_.find({domain, op});
  return b ? *b : nullptr;
}

Builder find_builder(const std::string& domain, const std::string& op) {
  return table().find(domain, op);
}

std::vector<ops::OpKey> BuilderTable::keys() const {
  return entries_.keys();
}

std::vector<ops::OpKey> builder_keys() {
  return table().keys();
}

bool plan_needs_cudnn(const plan::Plan& plan) {
  for (const auto& s : plan.steps()) {
    if (uses_cudnn(s)) return true;
  }
  return false;
}

int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < v.size(); ++i) p *= v[i];
  return p;
}

void require_same_type(const StepContext& ctx) {
  if (ctx.out_dtype(0) != ctx.in_dtype(0)) ctx.fail("the output's type differs from the input's");
}

std::string describe_step(const plan::Plan& plan, int index) {
  const plan::Step& s = plan.steps(index);
  std::string out = "step " + std::to_string(index) + " (ONNX node '" +
                    (s.source_nodes_size() ? s.source_nodes(0) : std::string("?")) + "', op " +
                    (s.domain().empty() ? "" : s.domain() + ".") + s.op();
  if (!s.kernel().empty()) out += ", kernel " + s.kernel();
  if (const std::string e = plan::gemm_epilogue_name(s); !e.empty()) out += ", epilogue " + e;
  return out + ")";
}

bool is_library_step(const plan::Step& step) {
  return uses_cudnn(step) || uses_cublaslt(step);
}

void check_library_step(StepContext& ctx) {
  if (uses_cudnn(ctx.step())) check_conv_step(ctx);
  if (uses_cublaslt(ctx.step())) check_gemm_step(ctx);
}

std::vector<std::string> cuda_load_refusals(const plan::Plan& plan) {
  std::vector<std::string> refusals = missing_cuda_ops(plan);
  if (!refusals.empty()) return refusals;
  std::unique_ptr<DeviceMemory> memory;
  try {
    memory = std::make_unique<DeviceMemory>(plan);  // the layout only: nothing is allocated
  } catch (const Error& e) {
    return {e.what()};
  }
  const Handles handles;  // no library handles: library steps are checked, not built
  const DeviceInfo device;
  for (int i = 0; i < plan.steps_size(); ++i) {
    const plan::Step& s = plan.steps(i);
    if (s.domain() == "ampc.kernel") continue;  // generated kernels: their PTX is in the plan
    StepContext ctx(plan, i, *memory, handles, device);
    try {
      if (is_library_step(s)) {
        check_library_step(ctx);
      } else {
        find_builder(s.domain(), s.op())(ctx);
      }
    } catch (const Error& e) {
      refusals.push_back(describe_step(plan, i) + ": " + e.what());
    }
  }
  return refusals;
}

std::vector<std::string> missing_cuda_ops(const plan::Plan& plan) {
  std::vector<std::string> missing;
  for (const auto& s : plan.steps()) {
    if (find_builder(s.domain(), s.op())) continue;
    missing.push_back((s.domain().empty() ? "" : s.domain() + ".") + s.op() + " (node '" +
                      (s.source_nodes_size() ? s.source_nodes(0) : std::string("?")) + "')");
  }
  return missing;
}

}  // namespace ampc::rt::cuda
