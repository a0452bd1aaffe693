#include "runtime/cpu/executor.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "kernels/cpu/dnnl_context.h"
#include "kernels/shared/dropout_math.h"
#include "runtime/cpu/heap_reuse.h"
#include "runtime/cpu/library_step.h"
#include "runtime/plan/plan_stats.h"
#include "runtime/state_copies.h"
#include "runtime/value_checks.h"

namespace ampc::rt::cpu {
namespace {

std::string step_label(const plan::Step& s) {
  return "node '" + (s.source_nodes_size() ? s.source_nodes(0) : std::string("?")) + "' (" +
         (s.domain().empty() ? "" : s.domain() + ".") + s.op() + ")";
}

}  // namespace

std::vector<std::string> missing_cpu_ops(const plan::Plan& plan) {
  std::vector<std::string> missing;
  const auto& registry = OpRegistry::instance();
  for (const auto& s : plan.steps()) {
    if (is_kernel_step(s)) {
      bool defined = false;
      for (const auto& k : plan.kernels()) defined |= k.name() == s.kernel();
      if (!defined) missing.push_back(step_label(s) + " (kernel '" + s.kernel() + "')");
    } else if (!registry.find(s.op(), s.domain())) {
      missing.push_back(step_label(s));
    }
  }
  return missing;
}

Executor::Executor(plan::Plan plan) : plan_(std::move(plan)) {
  keep_freed_memory_for_reuse();
  const auto& registry = OpRegistry::instance();
  values_.resize(plan_.buffers_size());
  for (const auto& b : plan_.buffers()) {
    if (b.id() < 0 || b.id() >= plan_.buffers_size())
      throw Error("plan buffer '" + b.name() + "' has a bad id");
    if ((b.role() == plan::CONSTANT || b.role() == plan::STATE) && !is_rounded_copy(b))
      values_[b.id()] = tensor_from_data(b.initial());
  }
  round_copies();  // a rounded copy's initial value is its master's (plan.proto)
  drop_initial_state_bytes();
  kernels_ = std::make_unique<KernelSteps>(plan_);
  calls_.resize(plan_.steps_size());
  folded_.resize(plan_.steps_size());
  slot_.resize(plan_.buffers_size());
  for (int id = 0; id < plan_.buffers_size(); ++id) slot_[id] = id;
  std::vector<int> last_reader(plan_.buffers_size(), -1);
  for (int i = 0; i < plan_.steps_size(); ++i) {
    const auto& s = plan_.steps(i);
    if (is_kernel_step(s)) {
      calls_[i] = kernels_->resolve(plan_, s);
      ops_.push_back(nullptr);
      place_in_state(i);
      for (int id : s.inputs()) last_reader[id] = i;
      continue;
    }
    const CpuOp* op = registry.find(s.op(), s.domain());
    if (!op)
      throw Error(step_label(s) + ": the CPU backend has no kernel for operator '" + s.op() + "'");
    ops_.push_back(op);
    if (has_folded_work(s)) folded_[i] = std::make_unique<FoldedGemm>(*op, s, plan_);
    for (int id : s.inputs()) {
      if (id >= plan_.buffers_size()) throw Error(step_label(s) + ": bad buffer id in plan");
      if (id >= 0) last_reader[id] = i;
    }
  }
  // Sources of state updates live until the end of the step, when they become the state.
  for (const auto& u : plan_.state_updates()) last_reader[u.source()] = -1;
  free_after_.resize(plan_.steps_size());
  for (int id = 0; id < plan_.buffers_size(); ++id) {
    if (plan_.buffers(id).role() == plan::ACTIVATION && last_reader[id] >= 0 && slot(id) == id)
      free_after_[last_reader[id]].push_back(id);
  }
  place_in_arena();
  prepare_library_steps();
  plan::OutputCopies copies = plan::output_copies(plan_);
  output_copies_ = std::move(copies.after_step);
  end_copies_ = std::move(copies.at_end);
}

Executor::~Executor() = default;

void Executor::FreeBytes::operator()(uint8_t* p) const {
  std::free(p);
}

// The arena of the plan's memory plan, and each arena buffer's place in it. A place outside
// the arena is a broken plan, refused here rather than written.
void Executor::place_in_arena() {
  placed_.assign(static_cast<size_t>(plan_.buffers_size()), nullptr);
  const int64_t bytes = plan_.has_memory() ? plan_.memory().arena_bytes() : 0;
  if (bytes <= 0) return;
  constexpr int64_t kAlign = 4096;  // pages: also every alignment the plan asks for
  const int64_t alignment = plan_.memory().alignment();
  if (alignment < 0 || (alignment > 0 && kAlign % alignment != 0))
    throw Error("the plan's memory alignment " + std::to_string(alignment) + " is not supported");
  const auto size = static_cast<size_t>((bytes + kAlign - 1) / kAlign * kAlign);
  arena_.reset(static_cast<uint8_t*>(std::aligned_alloc(kAlign, size)));
  if (!arena_)
    throw Error("cannot allocate the plan's arena of " + std::to_string(bytes) + " bytes");
  std::memset(arena_.get(), 0, size);  // mapped once, here, rather than during a step
  for (const auto& b : plan_.buffers()) {
    if (b.region() != plan::REGION_ARENA || !b.shape_known() || slot(b.id()) != b.id()) continue;
    if (b.role() != plan::ACTIVATION && b.role() != plan::OUTPUT) continue;
    const int64_t need = plan::buffer_bytes(b);
    if (need < 0) continue;  // no fixed size: storage of its own
    if (b.offset() < 0 || b.offset() > bytes - need || (alignment > 0 && b.offset() % alignment))
      throw Error("plan buffer '" + b.name() + "' (" + buffer_type(b) + ") at arena offset " +
                  std::to_string(b.offset()) + " does not fit the arena of " +
                  std::to_string(bytes) + " bytes");
    placed_[static_cast<size_t>(b.id())] = arena_.get() + b.offset();
  }
}

// The GEMMs and convolutions that oneDNN serves get their primitives (and this thread's
// workspace) now, when the plan is loaded, not during the first training step: each such
// step runs once in oneDNN's prepare-only mode, over its constants and state and zeros for
// the rest (nothing is computed by oneDNN; what an op does around the call is cheap).
void Executor::prepare_library_steps() {
  // ampc.Conv and ampc.ConvTranspose: a bf16 plan's convolutions (ONNX's have no bf16,
  // passes/autocast.cc).
  auto is_library = [](const plan::Step& s) {
    const std::string& op = s.op();
    return (s.domain().empty() &&
            (op == "MatMul" || op == "Gemm" || op == "Conv" || op == "ConvTranspose")) ||
           (s.domain() == "ampc" && (op == "ConvGrad" || op == "Conv" || op == "ConvTranspose"));
  };
  auto dnnl_type = [](int32_t t) {
    return t == static_cast<int32_t>(DType::kFloat32) ||
           t == static_cast<int32_t>(DType::kBFloat16);
  };
  std::vector<int> steps;
  size_t scratch_bytes = 0;
  for (int i = 0; i < plan_.steps_size(); ++i) {
    const auto& s = plan_.steps(i);
    if (!ops_[static_cast<size_t>(i)] || !is_library(s) || s.inputs_size() == 0) continue;
    bool ok = s.inputs(0) >= 0 && dnnl_type(plan_.buffers(s.inputs(0)).dtype());
    for (int id : s.inputs()) {
      if (id < 0) continue;
      const auto& b = plan_.buffers(id);
      const int64_t bytes = plan::buffer_bytes(b);
      ok &= bytes >= 0;
      if (ok) scratch_bytes = std::max(scratch_bytes, static_cast<size_t>(bytes));
    }
    if (ok) steps.push_back(i);
  }
  if (steps.empty()) return;
  std::vector<uint8_t> zeros(scratch_bytes);
  const kernels::cpu::dnnl_support::PrepareOnly prepare_only;
  for (int i : steps) {
    const auto& s = plan_.steps(i);
    std::vector<Tensor> in_values;
    in_values.reserve(static_cast<size_t>(s.inputs_size()));
    std::vector<const Tensor*> ins;
    for (int id : s.inputs()) {
      if (id < 0) {
        ins.push_back(nullptr);
        continue;
      }
      const auto& b = plan_.buffers(id);
      if (values_[slot(id)].defined()) {
        ins.push_back(&values_[slot(id)]);  // a constant or a piece of state
        continue;
      }
      in_values.push_back(Tensor::borrowed(static_cast<DType>(b.dtype()),
                                           {b.shape().begin(), b.shape().end()}, zeros.data()));
      ins.push_back(&in_values.back());
    }
    std::vector<Tensor> out_values(static_cast<size_t>(s.outputs_size()));
    std::vector<Tensor*> outs;
    for (int k = 0; k < s.outputs_size(); ++k) {
      const int id = s.outputs(k);
      if (id >= 0 && placed_[static_cast<size_t>(id)]) {  // no allocation: its planned place
        const auto& b = plan_.buffers(id);
        out_values[static_cast<size_t>(k)] =
            Tensor::borrowed(static_cast<DType>(b.dtype()), {b.shape().begin(), b.shape().end()},
                             placed_[static_cast<size_t>(id)]);
      }
      outs.push_back(id >= 0 ? &out_values[static_cast<size_t>(k)] : nullptr);
    }
    try {
      if (folded_[static_cast<size_t>(i)]) {
        folded_[static_cast<size_t>(i)]->run(ins, outs);
      } else {
        OpContext ctx(s, std::move(ins), std::move(outs));
        (*ops_[static_cast<size_t>(i)])(ctx);
      }
    } catch (const Error&) {
      // Reported when the step runs, with its inputs.
    }
  }
}

void Executor::bind_placed_outputs(size_t index) {
  for (int id : plan_.steps(static_cast<int>(index)).outputs()) {
    if (id < 0 || !placed_[static_cast<size_t>(id)]) continue;
    const auto& b = plan_.buffers(id);
    values_[id] =
        Tensor::borrowed(static_cast<DType>(b.dtype()), {b.shape().begin(), b.shape().end()},
                         placed_[static_cast<size_t>(id)]);
  }
}

std::vector<Tensor> Executor::inputs_overwritten_by(size_t index,
                                                    const std::vector<const Tensor*>& ins) const {
  std::vector<Tensor> copies(ins.size());
  auto range = [](const Tensor& t) {
    const auto* p = static_cast<const uint8_t*>(t.raw());
    return std::make_pair(p, p + t.nbytes());
  };
  for (int id : plan_.steps(static_cast<int>(index)).outputs()) {
    if (id < 0 || !values_[slot(id)].defined() || values_[slot(id)].nbytes() == 0) continue;
    const auto [lo, hi] = range(values_[slot(id)]);
    for (size_t k = 0; k < ins.size(); ++k) {
      if (!ins[k] || ins[k]->nbytes() == 0 || copies[k].defined()) continue;
      const auto [a, b] = range(*ins[k]);
      if (a < hi && lo < b) {
        copies[k] = Tensor(ins[k]->dtype(), ins[k]->shape());
        std::memcpy(copies[k].raw(), ins[k]->raw(), ins[k]->nbytes());
      }
    }
  }
  return copies;
}

void Executor::copy_outputs_of(size_t index) {
  for (int k : output_copies_[index])
    output_values_[static_cast<size_t>(k)] = values_[slot(plan_.outputs(k).buffer())].owned_copy();
}

// Outputs of kernel step `index` that alias the STATE buffer they update (alias_of, with the
// matching state update) live in that state's slot: the kernel computes into it, and the
// state update has nothing to copy. Other aliases (views, reuse) are the memory plan's
// business; this backend gives such buffers storage of their own, which computes the same.
void Executor::place_in_state(size_t index) {
  const auto& s = plan_.steps(static_cast<int>(index));
  for (int id : s.outputs()) {
    const int target = plan_.buffers(id).alias_of() - 1;
    if (target < 0 || target >= plan_.buffers_size() || plan_.buffers(target).role() != plan::STATE)
      continue;
    for (const auto& u : plan_.state_updates()) {
      if (u.source() == id && u.state() == target) slot_[id] = target;
    }
  }
  // A guarded kernel writes nothing when its guard is set: only outputs computed in place
  // keep the right value then (the state's).
  if (calls_[index].def->guard() == 0) return;
  for (int id : s.outputs()) {
    if (slot(id) == id) {
      throw Error(step_label(s) + ": output '" + plan_.buffers(id).name() +
                  "' of a guarded kernel does not alias the state it updates");
    }
  }
}

std::map<std::string, Tensor> Executor::run(const std::map<std::string, Tensor>& inputs) {
  for (const auto& [id, t] : checked_inputs(plan_, inputs)) {
    // A borrowed input (the Python API's caller's array) is read where it lies: input
    // buffers are never written (outputs get slots of their own, or a state's).
    values_[id] = *t;
  }
  output_values_.assign(static_cast<size_t>(plan_.outputs_size()), Tensor());
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (!step_hook_) {
      run_step(i);
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    run_step(i);
    step_hook_(static_cast<int>(i),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  ++runs_done_;
  for (int k : end_copies_)
    output_values_[static_cast<size_t>(k)] = values_[slot(plan_.outputs(k).buffer())].owned_copy();
  std::map<std::string, Tensor> outputs;
  for (int k = 0; k < plan_.outputs_size(); ++k)
    outputs[plan_.outputs(k).name()] = std::move(output_values_[static_cast<size_t>(k)]);
  output_values_.clear();
  for (const auto& u : plan_.state_updates()) {
    if (slot(u.source()) == u.state()) continue;
    Tensor& source = values_[u.source()];
    Tensor& state = values_[u.state()];
    if (!source.is_borrowed()) {
      state = std::move(source);
    } else if (!state.is_borrowed() && state.dtype() == source.dtype() &&
               state.shape() == source.shape()) {
      // Into the state's own storage: an arena source is overwritten by the next run.
      if (source.nbytes() > 0) std::memcpy(state.raw(), source.raw(), source.nbytes());
    } else {
      state = source.owned_copy();
    }
  }
  for (int id = 0; id < plan_.buffers_size(); ++id) {
    const auto role = plan_.buffers(id).role();
    if (slot(id) == id && (role == plan::ACTIVATION || role == plan::OUTPUT || role == plan::INPUT))
      values_[id] = Tensor();
  }
  return outputs;
}

std::map<std::string, Tensor> Executor::state() const {
  std::map<std::string, Tensor> out;
  for (const auto& b : plan_.buffers()) {
    if (b.role() == plan::STATE && !is_rounded_copy(b)) out[b.name()] = values_[b.id()];
  }
  return out;
}

void Executor::load_state(const std::map<std::string, Tensor>& values) {
  const auto updates = checked_state_values(plan_, values);
  // The steps update state in place: never in a caller's memory.
  for (const auto& [id, t] : updates) values_[id] = t->owned_copy();
  round_copies();
}

// The state now lives in values_: the plan's own copy of its initial bytes (every weight)
// would double the parameters' memory for the executor's lifetime. plan() keeps each state
// buffer's type and shape; state() gives its values. Constants keep theirs (the trainer reads
// the compiled learning rate from them).
void Executor::drop_initial_state_bytes() {
  for (auto& b : *plan_.mutable_buffers()) {
    if (b.role() != plan::STATE || !b.has_initial()) continue;
    std::string().swap(*b.mutable_initial()->mutable_data());  // clear() keeps the capacity
  }
}

void Executor::round_copies() {
  for (const auto& [copy, master] : rounded_copies(plan_))
    values_[copy] = rounded_copy(values_[master], static_cast<DType>(plan_.buffers(copy).dtype()));
}

void Executor::run_step(size_t index) {
  const auto& s = plan_.steps(static_cast<int>(index));
  bind_placed_outputs(index);
  std::vector<const Tensor*> ins;
  for (int id : s.inputs()) {
    if (id < 0) {
      ins.push_back(nullptr);
      continue;
    }
    if (!values_[slot(id)].defined()) {
      throw Error(step_label(s) + ": input buffer '" + plan_.buffers(id).name() +
                  "' has no value yet");
    }
    ins.push_back(&values_[slot(id)]);
  }
  // The observer sees the inputs as the step read them: an input the step overwrites (a
  // write in place) is copied first.
  std::vector<Tensor> before;
  if (step_observer_) before = inputs_overwritten_by(index, ins);
  if (ops_[index]) {
    std::vector<Tensor*> outs;
    for (int id : s.outputs()) outs.push_back(id >= 0 ? &values_[id] : nullptr);
    if (folded_[index]) {
      folded_[index]->run(ins, outs);
    } else {
      OpContext ctx(s, std::move(ins), std::move(outs));
      ctx.set_random_key(
          kernels::shared::step_key(kernels::shared::run_key(seed_, runs_done_), index));
      (*ops_[index])(ctx);
    }
  } else {
    run_kernel(index, ins);
  }
  // The plan's static types are a contract with later passes (memory planning, CUDA);
  // a kernel that disagrees is a bug worth stopping for.
  for (int id : s.outputs()) {
    if (id < 0) continue;
    const auto& buf = plan_.buffers(id);
    const Tensor& t = values_[slot(id)];
    if (!t.defined()) throw Error(step_label(s) + ": output '" + buf.name() + "' was not produced");
    const bool dtype_ok = buf.dtype() == 0 || static_cast<DType>(buf.dtype()) == t.dtype();
    const bool shape_ok = !buf.shape_known() ||
                          std::vector<int64_t>(buf.shape().begin(), buf.shape().end()) == t.shape();
    if (!dtype_ok || !shape_ok) {
      throw Error(step_label(s) + ": output '" + buf.name() + "' is " + t.type_str() +
                  " but the plan expects " + buffer_type(buf));
    }
  }
  if (step_observer_) {
    auto tensors = [&](const auto& ids) {
      std::vector<const Tensor*> ts;
      for (int id : ids) ts.push_back(id >= 0 ? &values_[slot(id)] : nullptr);
      return ts;
    };
    std::vector<const Tensor*> seen = tensors(s.inputs());
    for (size_t k = 0; k < seen.size(); ++k) {
      if (before[k].defined()) seen[k] = &before[k];
    }
    step_observer_(static_cast<int>(index), seen, tensors(s.outputs()));
  }
  copy_outputs_of(index);
  for (int id : free_after_[index]) values_[id] = Tensor();
}

// Outputs are views of the arena where the memory plan places them (not zeroed: a kernel
// writes every element), else allocated with the plan's static types, except those computed
// in place into a state (which already holds the state's value: a guarded kernel may keep it).
void Executor::run_kernel(size_t index, const std::vector<const Tensor*>& inputs) {
  const auto& s = plan_.steps(static_cast<int>(index));
  std::vector<Tensor*> outs;
  for (int id : s.outputs()) {
    if (slot(id) == id && !placed_[static_cast<size_t>(id)]) {  // placed: a view already
      const auto& b = plan_.buffers(id);
      values_[id] = Tensor(static_cast<DType>(b.dtype()), {b.shape().begin(), b.shape().end()});
    }
    outs.push_back(&values_[slot(id)]);
  }
  run_kernel_step(calls_[index], inputs, outs);
}

}  // namespace ampc::rt::cpu
