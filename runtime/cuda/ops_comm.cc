// ampc.AllReduceStart / ampc.AllReduceWait (ops/schemas/comm_schemas.h) on the GPU, through NCCL on
// a stream of its own: the start converts the bucket's gradients into its in-flight buffers on the
// compute stream, records an event, and the communication stream waits for it and runs one
// grouped ncclAllReduce (ncclAvg: the mean over the ranks) in place, then records the bucket's
// event; the wait makes the compute stream wait for that event and converts back. Both are event
// edges between the two streams, which stream capture turns into dependencies of the step's CUDA
// Graph, so the communication overlaps the rest of the backward inside the one graph launch.
// Without a communicator (no MPI: one GPU) the steps are the conversions alone.
// ampc.AllReduceSum and ampc.BatchStatistics (synchronised BatchNorm) are at the end.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <map>
#include <memory>
#include <vector>

#include "kernels/cuda/elementwise.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/nccl_comm.h"
#include "runtime/cuda/op_builders.h"
#include "runtime/dtype_codes.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cuda {
namespace {

namespace kc = kernels::cuda;

// The communication stream and one event per bucket, made at load (a builder may create them,
// a launch may not) and kept for the process, as the communicator is.
struct CommStreams {
  cudaStream_t stream = nullptr;
  std::map<int64_t, std::pair<cudaEvent_t, cudaEvent_t>> events;  // bucket -> (ready, done)
};

CommStreams& comm_streams() {
  static auto* s = new CommStreams;
  return *s;
}

std::pair<cudaEvent_t, cudaEvent_t> bucket_events(int64_t bucket) {
  CommStreams& s = comm_streams();
  if (!s.stream)
    check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  auto it = s.events.find(bucket);
  if (it != s.events.end()) return it->second;
  cudaEvent_t ready, done;
  check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  return s.events[bucket] = {ready, done};
}

ncclDataType_t nccl_type(const StepContext& ctx, DType t) {
  static constexpr DTypeCode<ncclDataType_t> kCodes[] = {{DType::kFloat32, ncclFloat32},
                                                         {DType::kFloat64, ncclFloat64},
                                                         {DType::kFloat16, ncclFloat16},
                                                         {DType::kBFloat16, ncclBfloat16}};
  if (const auto code = find_dtype_code(kCodes, t)) return *code;
  ctx.fail("cannot all-reduce " + std::string(dtype_name(t)));
}

struct Converted {
  std::vector<DevPtr> in, out;
  std::vector<DType> from, to;
  std::vector<int64_t> numel;
};

// The step's inputs converted into its outputs, pairwise.
Converted conversions(StepContext& ctx) {
  const int n = ctx.num_inputs();
  if (ctx.num_outputs() != n) ctx.fail("needs one output per input");
  Converted c;
  for (int i = 0; i < n; ++i) {
    c.in.push_back(ctx.in(i));
    c.out.push_back(ctx.out(i));
    c.from.push_back(ctx.in_dtype(i));
    c.to.push_back(ctx.out_dtype(i));
    c.numel.push_back(ctx.in_numel(i));
    (void)nccl_type(ctx, c.from.back());
    (void)nccl_type(ctx, c.to.back());
  }
  return c;
}

void convert_all(const Converted& c, cudaStream_t stream) {
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (c.from[i] == c.to[i]) {
      check(cudaMemcpyAsync(c.out[i].get(), c.in[i].get(),
                            static_cast<size_t>(c.numel[i]) * dtype_size(c.to[i]),
                            cudaMemcpyDeviceToDevice, stream),
            "cudaMemcpyAsync");
    } else {
      kc::cast(c.from[i], c.to[i], c.in[i].get(), c.out[i].get(), c.numel[i], stream);
    }
  }
}

Launch build_all_reduce_start(StepContext& ctx) {
  auto c = std::make_shared<Converted>(conversions(ctx));
  const auto [ready, done] =
      bucket_events(plan::params<plan::AllReduceParams>(ctx.step()).bucket());
  std::vector<ncclDataType_t> types;
  for (DType t : c->to) types.push_back(nccl_type(ctx, t));
  const cudaStream_t comm_stream = comm_streams().stream;
  return [c, ready, done, types, comm_stream](cudaStream_t stream) {
    convert_all(*c, stream);
    check(cudaEventRecord(ready, stream), "cudaEventRecord");
    check(cudaStreamWaitEvent(comm_stream, ready, 0), "cudaStreamWaitEvent");
    if (ncclComm_t comm = nccl_communicator()) {
      check_nccl(ncclGroupStart(), "ncclGroupStart");
      for (size_t i = 0; i < c->out.size(); ++i) {
        void* p = c->out[i].get();
        check_nccl(ncclAllReduce(p, p, static_cast<size_t>(c->numel[i]), types[i], ncclAvg, comm,
                                 comm_stream),
                   "ncclAllReduce");
      }
      check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    }
    check(cudaEventRecord(done, comm_stream), "cudaEventRecord");
  };
}

Launch build_all_reduce_wait(StepContext& ctx) {
  auto c = std::make_shared<Converted>(conversions(ctx));
  const cudaEvent_t done =
      bucket_events(plan::params<plan::AllReduceParams>(ctx.step()).bucket()).second;
  return [c, done](cudaStream_t stream) {
    check(cudaStreamWaitEvent(stream, done, 0), "cudaStreamWaitEvent");
    convert_all(*c, stream);
  };
}

// AllReduceSum (synchronised BatchNorm, passes/sync_batch_norm.h): blocking, so the compute
// stream waits for it. It runs on the communication stream, between two event edges, and not
// on the compute stream: NCCL needs the collectives of one communicator in the same order on
// every rank, and the gradient buckets' all-reduces (still in flight on the communication
// stream during the backward) would otherwise race with it across the two streams. One stream
// keeps the plan's order on every rank.
Launch build_all_reduce_sum(StepContext& ctx) {
  auto c = std::make_shared<Converted>(conversions(ctx));
  if (c->in.size() != 1 || c->from[0] != c->to[0]) ctx.fail("needs one input and its copy");
  static int64_t next_key = -1;  // the buckets' keys are >= 0
  const auto [ready, done] = bucket_events(next_key--);
  const ncclDataType_t type = nccl_type(ctx, c->to[0]);
  const cudaStream_t comm_stream = comm_streams().stream;
  return [c, ready, done, type, comm_stream](cudaStream_t stream) {
    ncclComm_t comm = nccl_communicator();
    if (!comm) {
      convert_all(*c, stream);  // one GPU: a copy
      return;
    }
    check(cudaEventRecord(ready, stream), "cudaEventRecord");
    check(cudaStreamWaitEvent(comm_stream, ready, 0), "cudaStreamWaitEvent");
    check_nccl(ncclAllReduce(c->in[0].get(), c->out[0].get(), static_cast<size_t>(c->numel[0]),
                             type, ncclSum, comm, comm_stream),
               "ncclAllReduce");
    check(cudaEventRecord(done, comm_stream), "cudaEventRecord");
    check(cudaStreamWaitEvent(stream, done, 0), "cudaStreamWaitEvent");
  };
}

// BatchStatistics: the batch statistics (inputs 2, 3) copied to the outputs.
Launch build_batch_statistics(StepContext& ctx) {
  if (ctx.num_inputs() != 4 || ctx.num_outputs() != 2) ctx.fail("needs 4 inputs and 2 outputs");
  std::vector<DevPtr> in = {ctx.in(2), ctx.in(3)}, out = {ctx.out(0), ctx.out(1)};
  std::vector<size_t> bytes = {static_cast<size_t>(ctx.in_numel(2)) * dtype_size(ctx.in_dtype(2)),
                               static_cast<size_t>(ctx.in_numel(3)) * dtype_size(ctx.in_dtype(3))};
  return [in, out, bytes](cudaStream_t stream) {
    for (size_t i = 0; i < 2; ++i) {
      check(cudaMemcpyAsync(out[i].get(), in[i].get(), bytes[i], cudaMemcpyDeviceToDevice, stream),
            "cudaMemcpyAsync");
    }
  };
}

}  // namespace

void register_comm_ops(BuilderTable& t) {
  t.add("ampc", "AllReduceStart", build_all_reduce_start);
  t.add("ampc", "AllReduceWait", build_all_reduce_wait);
  t.add("ampc", "AllReduceSum", build_all_reduce_sum);
  t.add("ampc", "BatchStatistics", build_batch_statistics);
}

}  // namespace ampc::rt::cuda
