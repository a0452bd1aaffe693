#include "report/plan_precision.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "passes/recompute_casts.h"
#include "runtime/plan/step_params.h"
#include "runtime/plan/step_phase.h"

namespace ampc::report {
namespace {

DType dtype_of(const plan::Buffer& b) {
  return static_cast<DType>(b.dtype());
}

bool is_low(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16;
}

bool is_onnx_op(const plan::Step& s, const char* op) {
  return s.domain().empty() && s.op() == op;
}

// The loss scaler's ops (ops/schemas/amp_schemas.h).
bool is_scaler_op(const plan::Step& s) {
  return s.domain() == "ampc" &&
         (s.op() == "UnscaleCheck" || s.op() == "UpdateScale" || s.op() == "ClipGradNorm");
}

std::string op_name(const plan::Step& s) {
  return s.domain().empty() ? s.op() : s.domain() + "." + s.op();
}

std::string source_nodes(const plan::Step& s) {
  std::string names;
  for (const auto& n : s.source_nodes()) names += (names.empty() ? "" : ", ") + n;
  return names;
}

// ampc.SoftmaxGrad or ampc.LayerNormalizationGrad: the backwards whose dY may be 16-bit beside
// float32 operands.
bool is_row_grad(const plan::Step& s) {
  return s.domain() == "ampc" && (s.op() == "SoftmaxGrad" || s.op() == "LayerNormalizationGrad");
}

// What a step computes in, from the buffers it touches: a Cast its target; an op that reads a
// 16-bit operand widened its outputs' type; otherwise a 16-bit float input (autocast made it
// so), else the first float input, else the first float output; kUndefined without floats
// (shape and integer ops).
DType compute_dtype(const plan::Plan& p, const plan::Step& s) {
  auto float_among = [&](const auto& ids) {
    DType first = DType::kUndefined;
    for (int32_t id : ids) {
      if (id < 0) continue;
      const DType t = dtype_of(p.buffers(id));
      if (is_low(t)) return t;
      if (is_float(t) && first == DType::kUndefined) first = t;
    }
    return first;
  };
  // A Cast computes in its target type.
  if (is_onnx_op(s, "Cast")) {
    const DType to = s.outputs_size() ? dtype_of(p.buffers(s.outputs(0))) : DType::kUndefined;
    return is_float(to) ? to : DType::kUndefined;
  }
  // The ops that may read a 16-bit operand widened compute in their outputs' type: the
  // cross-entropy's scores (passes/widened_loss_scores.h), the row backwards' dY
  // (passes/widened_row_grads.h).
  if (is_row_grad(s) || (s.domain() == "ampc" && s.op() == "SoftmaxCrossEntropyLoss")) {
    return float_among(s.outputs());
  }
  const DType in = float_among(s.inputs());
  return in != DType::kUndefined ? in : float_among(s.outputs());
}

// A row op's backward that reads a 16-bit dY widened beside float32 operands
// (passes/widened_row_grads.h).
bool reads_grad_widened(const plan::Plan& p, const plan::Step& s) {
  if (!is_row_grad(s) || s.inputs_size() < 2 || s.inputs(0) < 0 || s.inputs(1) < 0) return false;
  return is_low(dtype_of(p.buffers(s.inputs(0)))) &&
         dtype_of(p.buffers(s.inputs(1))) == DType::kFloat32;
}

int64_t numel(const plan::Buffer& b) {
  if (!b.shape_known()) return -1;
  int64_t n = 1;
  for (int64_t d : b.shape()) n *= d;
  return n;
}

std::optional<double> scalar(const plan::Buffer& b) {
  if (!b.has_initial()) return std::nullopt;
  if (b.initial().zeros()) return numel(b) == 1 ? std::optional<double>(0.0) : std::nullopt;
  const std::string& data = b.initial().data();
  auto read = [&]<typename T>(T) -> std::optional<double> {
    if (data.size() != sizeof(T)) return std::nullopt;
    T v;
    std::memcpy(&v, data.data(), sizeof(T));
    return static_cast<double>(v);
  };
  switch (static_cast<DType>(b.initial().dtype())) {
    case DType::kFloat32:
      return read(float{});
    case DType::kFloat64:
      return read(double{});
    case DType::kInt32:
      return read(int32_t{});
    case DType::kInt64:
      return read(int64_t{});
    default:
      return std::nullopt;
  }
}

// The masters of the 16-bit weight copies the optimizer writes (Buffer.copy_of), by the id of
// the Cast output that becomes the copy: the state update's source, or the new value a
// skip-step Where(skip, copy, new) chooses.
std::map<int32_t, int32_t> copy_casts(const plan::Plan& p) {
  std::map<int32_t, int32_t> master_of_source;
  for (const auto& u : p.state_updates()) {
    if (const plan::Buffer& b = p.buffers(u.state()); b.copy_of() != 0)
      master_of_source[u.source()] = b.copy_of() - 1;
  }
  std::map<int32_t, int32_t> out = master_of_source;
  for (const auto& s : p.steps()) {
    if (!is_onnx_op(s, "Where") || s.inputs_size() != 3 || s.outputs_size() != 1) continue;
    if (auto it = master_of_source.find(s.outputs(0)); it != master_of_source.end())
      out[s.inputs(2)] = it->second;
  }
  return out;
}

// The Casts, with their bytes per step as autocast counts them: numel x (in + out bytes).
// An fp32 master weight is an initializer of the source model (Buffer.from_model) other than
// the loss scaler's state (which a model in ONNX's training format carries as initializers).
// The Cast that writes a weight copy casts the master's new value: it is named by the master.
void add_casts(const plan::Plan& p, PrecisionReport& r) {
  const std::map<int32_t, int32_t> copies = copy_casts(p);
  for (const auto& s : p.steps()) {
    if (!is_onnx_op(s, "Cast") || s.inputs_size() != 1 || s.outputs_size() != 1) continue;
    const auto copy = copies.find(s.outputs(0));
    const plan::Buffer& in = p.buffers(copy == copies.end() ? s.inputs(0) : copy->second);
    const plan::Buffer& out = p.buffers(s.outputs(0));
    const int64_t n = numel(in);
    const int64_t bytes =
        n < 0 ? -1 : n * static_cast<int64_t>(dtype_size(dtype_of(in)) + dtype_size(dtype_of(out)));
    const bool parameter = in.from_model() && !is_scaler_state(p, in.name());
    r.casts.push_back(
        {source_nodes(s), in.name(), dtype_of(in), dtype_of(out), n, bytes, parameter});
  }
}

// The loss-scaling subgraph: the ampc ops, amp.scale and amp.growth_tracker, and the state
// updates predicated on amp.found_inf. Fills `guards` with the skip-step's Where steps.
std::optional<LossScalingReport> loss_scaling(const plan::Plan& p, std::set<int>& guards) {
  LossScalingReport s;
  std::set<int32_t> found_inf;
  for (const auto& step : p.steps()) {
    if (!is_scaler_op(step)) continue;
    s.ops.push_back({source_nodes(step), op_name(step)});
    if (step.op() == "UnscaleCheck" && step.outputs_size() > 0) {
      found_inf.insert(step.outputs(0));
      // Without a scale buffer (static scales fold into a constant inverse): 1/inv_scale.
      if (step.inputs_size() > 0) {
        if (auto inv = scalar(p.buffers(step.inputs(0))); inv && *inv != 1.0) {
          s.mode = "static";
          s.init_scale = 1.0 / *inv;
        }
      }
    }
    if (step.op() == "UpdateScale") {
      const auto& u = plan::params<plan::ScaleUpdateParams>(step);
      s.growth_factor = u.growth_factor();
      s.backoff_factor = u.backoff_factor();
      s.growth_interval = u.growth_interval();
      if (u.has_min_scale()) s.min_scale = u.min_scale();
      if (u.has_max_scale()) s.max_scale = u.max_scale();
    }
    if (step.op() == "ClipGradNorm") {
      s.grad_norm = true;
      const auto& c = plan::params<plan::ClipParams>(step);
      if (c.clip()) s.clip_grad_norm = c.max_norm();
    }
  }
  // The scale and the growth tracker, as the training signature names them.
  const plan::TrainingSignature& signature = p.training();
  for (const auto& b : p.buffers()) {
    if (!signature.scale_state().empty() && b.name() == signature.scale_state()) {
      s.mode = b.role() == plan::STATE ? "dynamic" : "static";
      s.init_scale = scalar(b);
    } else if (is_scaler_state(p, b.name())) {
      if (auto v = scalar(b)) s.init_growth_tracker = static_cast<int64_t>(*v);
    }
  }
  if (s.ops.empty() && s.mode.empty()) return std::nullopt;
  if (s.mode.empty()) s.mode = "none";

  std::map<int32_t, int> producer;
  for (int i = 0; i < p.steps_size(); ++i) {
    for (int32_t id : p.steps(i).outputs()) producer[id] = i;
  }
  for (const auto& u : p.state_updates()) {
    const bool copy = p.buffers(u.state()).copy_of() != 0;
    s.state_updates += copy ? 0 : 1;
    auto it = producer.find(u.source());
    if (it == producer.end()) continue;
    const plan::Step& w = p.steps(it->second);
    if (is_onnx_op(w, "Where") && w.inputs_size() == 3 && found_inf.count(w.inputs(0))) {
      if (copy) {
        ++s.guarded_copies;
      } else {
        s.guarded_states.push_back(p.buffers(u.state()).name());
      }
      guards.insert(it->second);
    }
  }
  return s;
}

// Which part of the training step the compiler added a step for ("" for the forward and
// the statistics), as it recorded it (Step.source_phases).
std::string_view part_of_step(const plan::Step& s) {
  const plan::StepPhase phase = plan::first_phase(s);
  return phase == plan::BACKWARD || phase == plan::LOSS_SCALING || phase == plan::OPTIMIZER
             ? plan::phase_name(phase)
             : "";
}

std::string recorded_option(const plan::Plan& p, const std::string& key) {
  for (const auto& o : p.options()) {
    if (o.key() == key) return o.value();
  }
  return "";
}

}  // namespace

bool is_scaler_state(const plan::Plan& p, const std::string& name) {
  const auto& names = p.training().scaler_state();
  return std::find(names.begin(), names.end(), name) != names.end();
}

PrecisionReport plan_precision_report(const plan::Plan& p, PlanOrigin origin) {
  PrecisionReport r;
  r.source = origin == PlanOrigin::kPlan ? "plan" : "model";
  // The precision it was compiled for, else the 16-bit dtype its buffers hold.
  r.precision = recorded_option(p, "precision");
  for (const auto& b : p.buffers()) {
    if (!r.precision.empty()) break;
    if (dtype_of(b) == DType::kFloat16) r.precision = "fp16";
    if (dtype_of(b) == DType::kBFloat16) r.precision = "bf16";
  }
  if (r.precision.empty()) r.precision = "fp32";
  const bool mixed = r.precision != "fp32";

  std::set<int> guards;
  r.loss_scaling = loss_scaling(p, guards);
  add_casts(p, r);

  std::map<std::string, const plan::PrecisionDecision*> decided;
  for (const auto& d : p.precision_decisions()) decided[d.node()] = &d;
  // Steps autocast did not decide: in a mixed plan, the backward, the optimizer and the
  // scaler follow the dtypes of their inputs; an exported model says nothing of its rules.
  auto undecided = [&](const plan::Step& s) -> std::string {
    if (!mixed) return "no autocast";
    if (origin == PlanOrigin::kModel) return "as exported";
    const std::string_view part = part_of_step(s);
    if (s.op() == "Cast" && s.source_nodes_size() == 1 &&
        s.source_nodes(0).ends_with(passes::kRecomputedSuffix))
      return "cast again before its backward readers (memory, passes/recompute_casts.h)";
    // A forward node without a record: unnamed, or a plan older than the records.
    if (part.empty()) return "not recorded in the plan";
    if (reads_grad_widened(p, s)) {
      return "not autocast's: " + std::string(part) +
             ", float32 as its forward; its 16-bit dY read widened, no float32 copy "
             "(widened_row_grads.h)";
    }
    return "not autocast's: " + std::string(part) + ", follows its inputs";
  };
  for (int i = 0; i < p.steps_size(); ++i) {
    const plan::Step& s = p.steps(i);
    PrecisionReport::Node n{source_nodes(s), op_name(s), compute_dtype(p, s), undecided(s),
                            origin == PlanOrigin::kPlan ? i : -1};
    const auto d = s.source_nodes_size() == 1 ? decided.find(s.source_nodes(0)) : decided.end();
    if (d != decided.end()) {
      n.compute_dtype = static_cast<DType>(d->second->compute_dtype());
      n.rule = d->second->rule();
    } else if (is_scaler_op(s)) {
      n.rule = "loss scaling";
    } else if (guards.count(i)) {
      n.rule = "skip-step: the old value when amp.found_inf";
    }
    r.nodes.push_back(std::move(n));
  }
  return r;
}

std::string lowered_precision_report(const plan::Plan& unfused, const plan::Plan& lowered) {
  std::unordered_map<std::string, int64_t> step_of;
  for (int i = 0; i < lowered.steps_size(); ++i) {
    for (const auto& node : lowered.steps(i).source_nodes()) step_of.emplace(node, i);
  }
  PrecisionReport r = plan_precision_report(unfused, PlanOrigin::kPlan);
  for (auto& n : r.nodes) {
    auto it = step_of.find(n.node);
    n.step = it == step_of.end() ? -1 : it->second;
  }
  return precision_report_json(r).dump();
}

PrecisionReport precision_report_of_plan(const plan::Plan& plan) {
  if (plan.precision_report().empty()) return plan_precision_report(plan, PlanOrigin::kPlan);
  return precision_report_from_json(nlohmann::json::parse(plan.precision_report()));
}

}  // namespace ampc::report
