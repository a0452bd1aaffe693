#include "runtime/cuda/executor.h"

#include <cstdlib>
#include <cstring>
#include <map>

#include "base/error.h"
#include "kernels/shared/dropout_math.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/op_builders.h"
#include "runtime/cuda/ptx_library.h"
#include "runtime/plan/plan_stats.h"
#include "runtime/state_copies.h"
#include "runtime/value_checks.h"

namespace ampc::rt::cuda {
namespace {

constexpr int64_t kAlign = 256;

int64_t align_up(int64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

bool same_storage(const plan::Buffer& a, const plan::Buffer& b) {
  return a.region() == b.region() && a.offset() == b.offset();
}

}  // namespace

bool sync_debug_from_env() {
  const char* v = std::getenv("AMPC_CUDA_SYNC_DEBUG");
  return v && *v && std::strcmp(v, "0") != 0;
}

Executor::Resources::~Resources() {
  if (pinned) (void)cudaFreeHost(pinned);
  if (handles.dnn) (void)cudnnDestroy(handles.dnn);
  if (handles.lt) (void)cublasLtDestroy(handles.lt);
  if (stream) (void)cudaStreamDestroy(stream);
}

Executor::Executor(plan::Plan plan, ExecutorOptions options)
    : plan_(std::move(plan)),
      device_(open_device(options.device)),
      depth_(std::max<int64_t>(1, options.pipeline_depth)),
      sync_debug_(options.sync_debug),
      pending_(depth_) {
  for (int i = 0; i < plan_.buffers_size(); ++i) {
    if (plan_.buffers(i).id() != i)
      throw Error("plan buffer '" + plan_.buffers(i).name() + "' has a bad id");
  }
  const std::vector<std::string> missing = missing_cuda_ops(plan_);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw Error("the CUDA backend cannot run " + std::to_string(missing.size()) +
                " step(s) of this plan: " + list + "; use --device cpu");
  }
  memory_ = std::make_unique<DeviceMemory>(plan_);
  check(cudaStreamCreateWithFlags(&res_.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cublasLtCreate(&res_.handles.lt), "cublasLtCreate");
  if (plan_needs_cudnn(plan_)) {  // only for convolutions: cuDNN cannot break other plans
    check(cudnnCreate(&res_.handles.dnn), "cudnnCreate");
    check(cudnnSetStream(res_.handles.dnn, res_.stream), "cudnnSetStream");
  }
  ptx_ = std::make_unique<PtxLibrary>(plan_, device_);
  res_.handles.ptx = ptx_.get();
  build_steps();
  check_state_updates();
  // An output is copied as soon as its step has written it (plan_stats.h).
  plan::OutputCopies copies = plan::output_copies(plan_);
  output_copies_ = std::move(copies.after_step);
  end_copies_ = std::move(copies.at_end);
  memory_->allocate();
  slot_outputs_ = align_up(memory_->input_bytes());
  slot_bytes_ = slot_outputs_ + align_up(memory_->output_block_bytes());
  if (slot_bytes_ > 0) {
    check(cudaHostAlloc(reinterpret_cast<void**>(&res_.pinned),
                        static_cast<size_t>(slot_bytes_ * depth_), cudaHostAllocDefault),
          "cudaHostAlloc of the input and output staging");
  }
  // One eager run first: libraries finish their lazy set-up outside the capture, and a
  // failing kernel is reported here with its step. It runs on zero inputs, so the state is
  // put back afterwards.
  const std::map<std::string, Tensor> initial = state();
  enqueue_step(res_.stream, true);
  check(cudaStreamSynchronize(res_.stream),
        std::string("the first (eager) run of the plan on the device") +
            (sync_debug_ ? "" : " (AMPC_CUDA_SYNC_DEBUG=1 names the failing step)"));
  load_state(initial);
  // (The zero inputs may have set error flags: each run clears them first.)
  graph_.capture(res_.stream, [this](cudaStream_t s) { enqueue_step(s, false); });
  counters_ = Counters{};
}

Executor::~Executor() {
  // Whatever is in flight finishes before the memory goes.
  if (res_.stream) (void)cudaStreamSynchronize(res_.stream);
}

void Executor::build_steps() {
  launches_.resize(static_cast<size_t>(plan_.steps_size()));
  for (int i = 0; i < plan_.steps_size(); ++i) {
    const plan::Step& s = plan_.steps(i);
    // A view in its input's storage moves nothing.
    if (plan::is_view_step(s) && s.inputs_size() >= 1 && s.outputs_size() >= 1 &&
        s.inputs(0) >= 0 && s.outputs(0) >= 0 &&
        same_storage(plan_.buffers(s.inputs(0)), plan_.buffers(s.outputs(0))))
      continue;
    StepContext ctx(plan_, i, *memory_, res_.handles, device_);
    launches_[static_cast<size_t>(i)] = find_builder(s.domain(), s.op())(ctx);
    ++launching_steps_;
  }
}

// A guarded kernel (the skip-step) writes nothing when its guard is set, so each of its
// outputs must live in the state it updates, as the CPU backend requires.
void Executor::check_state_updates() const {
  for (const auto& u : plan_.state_updates()) {
    const auto& state = plan_.buffers(u.state());
    const auto& source = plan_.buffers(u.source());
    if (state.role() != plan::STATE)
      throw Error("state update into '" + state.name() + "', which is not a STATE buffer");
    if (state.dtype() != source.dtype() || memory_->bytes(u.state()) != memory_->bytes(u.source()))
      throw Error("state update of '" + state.name() + "' from '" + source.name() +
                  "' of another type");
  }
  for (const auto& s : plan_.steps()) {
    if (s.domain() != "ampc.kernel" || s.op() != "FusedElementwise") continue;
    const kernels::KernelDef* def = nullptr;
    for (const auto& k : plan_.kernels()) {
      if (k.name() == s.kernel()) def = &k;
    }
    if (!def || def->guard() == 0) continue;
    for (int id : s.outputs()) {
      bool in_place = false;
      for (const auto& u : plan_.state_updates()) {
        in_place |= u.source() == id && same_storage(plan_.buffers(id), plan_.buffers(u.state()));
      }
      if (!in_place) {
        throw Error("fused kernel step '" + s.kernel() + "': output '" + plan_.buffers(id).name() +
                    "' of a guarded kernel does not live in the state it updates");
      }
    }
  }
}

// The whole step: every launch, each output copied into the output block once written (an
// output that is a state before the state updates: it reports the value the step used, as on
// the CPU), the state updates.
void Executor::enqueue_step(cudaStream_t stream, bool eager) const {
  // The error flags of the previous run were copied out with its output block (same stream).
  if (memory_->flag_bytes() > 0) {
    check(cudaMemsetAsync(memory_->flags(), 0, static_cast<size_t>(memory_->flag_bytes()), stream),
          "clearing the error flags");
  }
  for (size_t i = 0; i < launches_.size(); ++i) {
    if (launches_[i]) {
      if (!eager) {
        launches_[i](stream);
      } else {
        try {
          launches_[i](stream);
        } catch (const Error& e) {
          throw Error(describe_step(plan_, static_cast<int>(i)) + ": " + e.what());
        }
        check_eager_step(static_cast<int>(i), stream);
      }
    }
    for (int k : output_copies_[i]) copy_output(k, stream);
  }
  for (int k : end_copies_) copy_output(k, stream);
  for (const auto& u : plan_.state_updates()) {
    void* dst = memory_->address(u.state());
    const void* src = memory_->address(u.source());
    const int64_t bytes = memory_->bytes(u.state());
    if (dst == src || bytes == 0) continue;  // written in place (alias_of)
    check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream),
          "updating state '" + plan_.buffers(u.state()).name() + "'");
  }
}

// A launch error (bad configuration, missing kernel image) is seen at once; a fault while the
// work runs only after waiting for it, which sync_debug does after every step.
void Executor::check_eager_step(int i, cudaStream_t stream) const {
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t ran = sync_debug_ ? cudaStreamSynchronize(stream) : cudaSuccess;
  const cudaError_t status = launched != cudaSuccess ? launched : ran;
  if (status == cudaSuccess) return;
  // A fault while running (as opposed to a refused launch) is sticky: the context is lost.
  throw Error(
      describe_step(plan_, i) + " failed on the device: " + cudaGetErrorName(status) + " (" +
      cudaGetErrorString(status) + ")" +
      (ran != cudaSuccess ? "; the CUDA context is unusable for the rest of this process" : ""));
}

void Executor::copy_output(int k, cudaStream_t stream) const {
  const int id = plan_.outputs(k).buffer();
  const int64_t bytes = memory_->bytes(id);
  if (bytes == 0) return;
  char* block = static_cast<char*>(memory_->output_block());
  check(cudaMemcpyAsync(block + memory_->output_offset(k), memory_->address(id),
                        static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream),
        "copying output '" + plan_.outputs(k).name() + "'");
}

void Executor::sync() const {
  check(cudaStreamSynchronize(res_.stream), "running the plan on the device");
  ++counters_.host_syncs;
}

void Executor::submit(const std::map<std::string, Tensor>& inputs) {
  const auto bound = checked_inputs(plan_, inputs);
  if (pending_.full()) {  // every staging slot is in flight: wait for them
    sync();
    for (auto& out : pending_.drain([this](int64_t s) { return outputs_of(s); }))
      ready_.push_back(std::move(out));
  }
  char* slot = res_.pinned + pending_.next_slot() * slot_bytes_;
  for (const auto& [id, t] : bound) {
    const plan::Buffer* buf = &plan_.buffers(id);
    if (buf->region() != plan::REGION_INPUTS)
      throw Error("input '" + buf->name() + "' is not in the plan's input region");
    std::memcpy(slot + buf->offset(), t->raw(), t->nbytes());
  }
  if (memory_->has_run_key()) {
    const uint64_t key = kernels::shared::run_key(seed_, runs_done_);
    std::memcpy(slot + memory_->run_key_offset(), &key, sizeof key);
  }
  ++runs_done_;
  if (memory_->input_bytes() > 0) {
    check(cudaMemcpyAsync(memory_->inputs(), slot, static_cast<size_t>(memory_->input_bytes()),
                          cudaMemcpyHostToDevice, res_.stream),
          "copying the inputs to the device");
    ++counters_.async_copies;
  }
  graph_.launch(res_.stream);
  ++counters_.graph_launches;
  if (memory_->output_block_bytes() > 0) {
    check(cudaMemcpyAsync(slot + slot_outputs_, memory_->output_block(),
                          static_cast<size_t>(memory_->output_block_bytes()),
                          cudaMemcpyDeviceToHost, res_.stream),
          "copying the outputs from the device");
    ++counters_.async_copies;
  }
  pending_.add();
  ++counters_.steps;
}

std::map<std::string, Tensor> Executor::outputs_of(int64_t s) const {
  const char* block = res_.pinned + s * slot_bytes_ + slot_outputs_;
  if (const auto bad = memory_->flags_set(block); !bad.empty()) {
    std::string steps;
    for (const auto& b : bad) steps += (steps.empty() ? "" : ", ") + b;
    throw Error(steps);
  }
  std::map<std::string, Tensor> out;
  for (int k = 0; k < plan_.outputs_size(); ++k) {
    const auto& b = plan_.buffers(plan_.outputs(k).buffer());
    Tensor t(static_cast<DType>(b.dtype()), {b.shape().begin(), b.shape().end()});
    if (t.nbytes() > 0) std::memcpy(t.raw(), block + memory_->output_offset(k), t.nbytes());
    out[plan_.outputs(k).name()] = std::move(t);
  }
  return out;
}

std::vector<std::map<std::string, Tensor>> Executor::collect() {
  if (pending_.count() > 0) {
    sync();
    // An error (a run's flags) empties the queue first: the next collect starts afresh.
    std::vector<std::map<std::string, Tensor>> got;
    try {
      got = pending_.drain([this](int64_t s) { return outputs_of(s); });
    } catch (...) {
      ready_.clear();
      throw;
    }
    for (auto& out : got) ready_.push_back(std::move(out));
  }
  std::vector<std::map<std::string, Tensor>> out;
  out.swap(ready_);
  return out;
}

std::map<std::string, Tensor> Executor::run(const std::map<std::string, Tensor>& inputs) {
  submit(inputs);
  return collect().back();
}

std::map<std::string, Tensor> Executor::state() const {
  sync();
  std::map<std::string, Tensor> out;
  for (const auto& b : plan_.buffers()) {
    if (b.role() != plan::STATE || is_rounded_copy(b)) continue;
    out[b.name()] = memory_->download(b.id());
    ++counters_.host_syncs;  // a blocking copy
  }
  return out;
}

void Executor::load_state(const std::map<std::string, Tensor>& values) {
  const auto updates = checked_state_values(plan_, values);
  sync();
  for (const auto& [id, t] : updates) {
    memory_->upload(id, *t);
    ++counters_.host_syncs;
  }
  // The 16-bit copies the optimizer keeps, recomputed from the masters just loaded.
  std::map<int, const Tensor*> loaded(updates.begin(), updates.end());
  for (const auto& [copy, master] : rounded_copies(plan_)) {
    memory_->upload(
        copy, rounded_copy(*loaded.at(master), static_cast<DType>(plan_.buffers(copy).dtype())));
    ++counters_.host_syncs;
  }
  // Copies from pageable memory may return before the data lands (see DeviceMemory).
  check(cudaDeviceSynchronize(), "uploading the state");
}

}  // namespace ampc::rt::cuda
