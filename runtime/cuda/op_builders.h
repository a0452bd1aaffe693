// The CUDA backend's operators: for each (domain, op) a builder that turns a plan step into
// its Launch at load (step_context.h). One file per family registers its builders:
//   fused_step.cc   generated kernels (ampc.kernel FusedElementwise)
//   ops_gemm.cc     MatMul, Gemm through cuBLASLt (blas_lt.h)
//   ops_conv.cc     Conv, ampc.ConvGrad through cuDNN (cudnn_conv.h)
//   ops_nn.cc       softmax, LayerNormalization, SoftmaxCrossEntropyLoss, reductions, the
//                   loss scaler's ops, ampc.RangeStats, pooling, BatchNormalization
//                   (kernels/cuda)
//   ops_comm.cc     data-parallel all-reduce through NCCL (nccl_comm.h)
//   ops_tensor.cc   data movement, gather / scatter, integer and bool elementwise, Cast
//                   (kernels/cuda)
//   ops_random.cc   Dropout (kernels/cuda/dropout.h), RandomUniform / RandomNormal and their *Like
//                   forms (kernels/cuda/random.h), keyed by the run (StepContext::run_key)
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "ops/op_key.h"
#include "ops/op_map.h"
#include "runtime/cuda/step_context.h"

namespace ampc::rt::cuda {

using Builder = Launch (*)(StepContext&);

// The builder of (domain, op); null when the CUDA backend has none.
Builder find_builder(const std::string& domain, const std::string& op);
// Every op with a builder (ampc ops).
std::vector<ops::OpKey> builder_keys();

// Every step of the plan the CUDA backend cannot run, as "Op (node 'n')" strings.
std::vector<std::string> missing_cuda_ops(const plan::Plan& plan);

// What loading `plan` on the CUDA backend would refuse, found without a device: the device
// layout's refusal (no static memory plan, data-dependent shapes), or the steps without a
// builder (missing_cuda_ops) and those whose builder or library check refuses them (a
// non-constant Dropout ratio, an unsupported convolution), each "<step>: <reason>". Empty
// when every step builds. (Whether cuBLASLt and cuDNN have algorithms is known only on a
// device.) `ampc compile --target cuda:...` warns with it.
std::vector<std::string> cuda_load_refusals(const plan::Plan& plan);

// Whether any step runs through cuDNN (Conv, ampc.Conv, ampc.ConvGrad): the executor creates
// the cuDNN handle only then, so that a cuDNN problem cannot break a plan without
// convolutions.
bool plan_needs_cudnn(const plan::Plan& plan);

// Step `index` for messages: "step 12 (ONNX node 'Add_5', op ampc.kernel.FusedElementwise,
// kernel fused_3)".
std::string describe_step(const plan::Plan& plan, int index);

// Checks, without a device or library handle, what the builders of the library steps (MatMul,
// Gemm through cuBLASLt; Conv, ampc.Conv, ampc.ConvGrad through cuDNN) check before they call
// the library: shapes, element types, attributes, epilogues. Throws ampc::Error naming the
// step as the builder would; does nothing for other ops. (Whether the library has an
// algorithm is known only on a device.)
void check_library_step(StepContext& ctx);
bool is_library_step(const plan::Step& step);

// Registration, one call per family file (a second builder for an op throws: ops/op_map.h).
class BuilderTable {
 public:
  void add(const std::string& domain, const std::string& op, Builder b);
  Builder find(const std::string& domain, const std::string& op) const;
  std::vector<ops::OpKey> keys() const;

 private:
  ops::OpMap<Builder> entries_{"CUDA step builder"};
};
void register_gemm_ops(BuilderTable& t);
void register_conv_ops(BuilderTable& t);
void register_nn_ops(BuilderTable& t);
void register_tensor_ops(BuilderTable& t);
void register_comm_ops(BuilderTable& t);    // ops_comm.cc: ampc.AllReduceStart/Wait (NCCL)
void register_random_ops(BuilderTable& t);  // ops_random.cc: Dropout, RandomUniform / Normal

Launch build_fused_kernel(StepContext& ctx);

// The library families (ops_conv.cc, ops_gemm.cc): which steps they run, their checks
// without a device (check_library_step).
bool uses_cudnn(const plan::Step& step);
bool uses_cublaslt(const plan::Step& step);
void check_conv_step(StepContext& ctx);
void check_gemm_step(StepContext& ctx);

// ---- Helpers of the family files ----

// The product of v[begin, end) (end clamped to v's size; 1 when empty).
int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end);

// Fails unless output 0 has input 0's element type.
void require_same_type(const StepContext& ctx);

// The device addresses of buffers in order, as a kernel's pointer list takes them (call it in
// the launch: the memory is allocated only after every step is built).
template <typename P>
std::vector<P> addresses(const std::vector<DevPtr>& buffers) {
  std::vector<P> p;
  for (const DevPtr& d : buffers) p.push_back(d.get());
  return p;
}

}  // namespace ampc::rt::cuda
