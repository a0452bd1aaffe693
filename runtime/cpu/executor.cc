#include "runtime/cpu/executor.h"

#include <chrono>

#include "base/error.h"
#include "runtime/cpu/library_step.h"

namespace ampc::rt::cpu {
namespace {

std::string step_label(const plan::Step& s) {
  return "node '" + (s.source_nodes_size() ? s.source_nodes(0) : std::string("?")) + "' (" +
         (s.domain().empty() ? "" : s.domain() + ".") + s.op() + ")";
}

// SplitMix64's finaliser: a well-mixed 64-bit key from a structured one.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string buffer_type(const plan::Buffer& b) {
  return std::string(dtype_name(static_cast<DType>(b.dtype()))) +
         (b.shape_known() ? shape_str({b.shape().begin(), b.shape().end()}) : "[*]");
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
  const auto& registry = OpRegistry::instance();
  values_.resize(plan_.buffers_size());
  for (const auto& b : plan_.buffers()) {
    if (b.id() < 0 || b.id() >= plan_.buffers_size())
      throw Error("plan buffer '" + b.name() + "' has a bad id");
    if (b.role() == plan::CONSTANT || b.role() == plan::STATE)
      values_[b.id()] = tensor_from_data(b.initial());
  }
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
}

Executor::~Executor() = default;

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
  for (const auto& [name, t] : inputs) {
    bool known = false;
    for (const auto& b : plan_.inputs()) known |= (b.name() == name);
    if (!known) throw Error("the plan has no input named '" + name + "'");
  }
  for (const auto& binding : plan_.inputs()) {
    auto it = inputs.find(binding.name());
    const auto& buf = plan_.buffers(binding.buffer());
    if (it == inputs.end())
      throw Error("input '" + binding.name() + "' (" + buffer_type(buf) + ") is not given");
    const Tensor& t = it->second;
    const bool type_ok = static_cast<DType>(buf.dtype()) == t.dtype();
    const bool shape_ok = !buf.shape_known() ||
                          std::vector<int64_t>(buf.shape().begin(), buf.shape().end()) == t.shape();
    if (!type_ok || !shape_ok) {
      throw Error("input '" + binding.name() + "' must be " + buffer_type(buf) + ", got " +
                  t.type_str());
    }
    // A borrowed input (the Python API's caller's array) is read where it lies: input
    // buffers are never written (outputs get slots of their own, or a state's).
    values_[binding.buffer()] = t;
  }
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
  std::map<std::string, Tensor> outputs;
  for (const auto& binding : plan_.outputs())
    outputs[binding.name()] = values_[slot(binding.buffer())].owned_copy();
  for (const auto& u : plan_.state_updates()) {
    if (slot(u.source()) == u.state()) continue;
    Tensor& source = values_[u.source()];
    values_[u.state()] = source.is_borrowed() ? source.owned_copy() : std::move(source);
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
    if (b.role() == plan::STATE) out[b.name()] = values_[b.id()];
  }
  return out;
}

void Executor::load_state(const std::map<std::string, Tensor>& values) {
  std::vector<std::pair<int, const Tensor*>> updates;
  for (const auto& b : plan_.buffers()) {
    if (b.role() != plan::STATE) continue;
    auto it = values.find(b.name());
    if (it == values.end()) throw Error("no value for state '" + b.name() + "'");
    const Tensor& t = it->second;
    const std::vector<int64_t> shape(b.shape().begin(), b.shape().end());
    if (static_cast<DType>(b.dtype()) != t.dtype() || (b.shape_known() && shape != t.shape())) {
      throw Error("state '" + b.name() + "' must be " + buffer_type(b) + ", got " + t.type_str());
    }
    updates.emplace_back(b.id(), &t);
  }
  // The steps update state in place: never in a caller's memory.
  for (const auto& [id, t] : updates) values_[id] = t->owned_copy();
}

void Executor::run_step(size_t index) {
  const auto& s = plan_.steps(static_cast<int>(index));
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
  if (ops_[index]) {
    std::vector<Tensor*> outs;
    for (int id : s.outputs()) outs.push_back(id >= 0 ? &values_[id] : nullptr);
    if (folded_[index]) {
      folded_[index]->run(ins, outs);
    } else {
      OpContext ctx(s, std::move(ins), std::move(outs));
      ctx.set_random_key(mix(mix(seed_ ^ mix(static_cast<uint64_t>(runs_done_))) + index));
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
    step_observer_(static_cast<int>(index), tensors(s.inputs()), tensors(s.outputs()));
  }
  for (int id : free_after_[index]) values_[id] = Tensor();
}

// Outputs are allocated with the plan's static types, except those computed in place into
// a state (which already holds the state's value: a guarded kernel may keep it).
void Executor::run_kernel(size_t index, const std::vector<const Tensor*>& inputs) {
  const auto& s = plan_.steps(static_cast<int>(index));
  std::vector<Tensor*> outs;
  for (int id : s.outputs()) {
    if (slot(id) == id) {
      const auto& b = plan_.buffers(id);
      values_[id] = Tensor(static_cast<DType>(b.dtype()), {b.shape().begin(), b.shape().end()});
    }
    outs.push_back(&values_[slot(id)]);
  }
  run_kernel_step(calls_[index], inputs, outs);
}

}  // namespace ampc::rt::cpu
