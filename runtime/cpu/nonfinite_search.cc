#include "runtime/cpu/nonfinite_search.h"

#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "runtime/cpu/op_context.h"
#include "runtime/plan/step_phase.h"

namespace ampc::rt::cpu {
namespace {

TensorMagnitude measure(const std::string& name, const Tensor& t) {
  TensorMagnitude m{name, t.type_str()};
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = float_element(t, i);
    if (std::isnan(v)) {
      ++m.nan;
    } else if (std::isinf(v)) {
      ++m.inf;
    } else {
      m.max_abs = std::max(m.max_abs, std::abs(v));
    }
  }
  return m;
}

// The part of the step the compiler recorded for the step's first node; the loss scaler's
// steps (unscale, clip, the scale's update) count as the optimizer's, as in the log.
std::string phase_of(const plan::Step& s) {
  const plan::StepPhase phase = plan::first_phase(s);
  if (phase == plan::LOSS_SCALING) return plan::phase_name(plan::OPTIMIZER);
  return phase == plan::BACKWARD || phase == plan::OPTIMIZER ? plan::phase_name(phase)
                                                             : plan::phase_name(plan::FORWARD);
}

// Thrown by the observer to stop the run at the origin.
struct Found {};

}  // namespace

std::optional<NonFiniteOrigin> find_nonfinite_origin(Executor& exec,
                                                     const std::map<std::string, Tensor>& inputs) {
  const plan::Plan& p = exec.plan();
  for (const auto& [name, t] : inputs) {
    if (!is_float(t.dtype())) continue;
    const TensorMagnitude m = measure(name, t);
    if (m.nan || m.inf) return NonFiniteOrigin{-1, "", "", "input", m, {}};
  }
  for (const auto& [name, t] : exec.state()) {
    if (!is_float(t.dtype())) continue;
    const TensorMagnitude m = measure(name, t);
    if (m.nan || m.inf) return NonFiniteOrigin{-1, "", "", "state", m, {}};
  }

  std::optional<NonFiniteOrigin> origin;
  exec.set_step_observer([&](int index, const std::vector<const Tensor*>& ins,
                             const std::vector<const Tensor*>& outs) {
    const plan::Step& s = p.steps(index);
    std::vector<TensorMagnitude> in_m;
    bool in_nan = false, in_nonfinite = false;
    for (size_t k = 0; k < ins.size(); ++k) {
      if (!ins[k] || !is_float(ins[k]->dtype())) continue;
      in_m.push_back(measure(p.buffers(s.inputs(static_cast<int>(k))).name(), *ins[k]));
      in_nan |= in_m.back().nan > 0;
      in_nonfinite |= in_m.back().nan > 0 || in_m.back().inf > 0;
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!outs[k] || !is_float(outs[k]->dtype())) continue;
      const TensorMagnitude m = measure(p.buffers(s.outputs(static_cast<int>(k))).name(), *outs[k]);
      const bool produced = (m.nan && !in_nan) || (m.inf && !in_nonfinite);
      if (!produced) continue;
      // A fused kernel computes several nodes: all of them are named.
      std::string node;
      for (const auto& n : s.source_nodes()) node += (node.empty() ? "" : ", ") + n;
      const std::string phase = phase_of(s);
      origin = NonFiniteOrigin{index, node, (s.domain().empty() ? "" : s.domain() + ".") + s.op(),
                               phase, m,    in_m};
      throw Found{};
    }
  });
  try {
    exec.run(inputs);
  } catch (const Found&) {
  } catch (...) {
    exec.set_step_observer(nullptr);
    throw;
  }
  exec.set_step_observer(nullptr);
  return origin;
}

std::string describe(const NonFiniteOrigin& o) {
  auto magnitude = [](const TensorMagnitude& m) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "max |x| %.4g", m.max_abs);
    std::string s = m.name + " " + m.type + ": " + buf;
    if (m.nan) s += ", " + std::to_string(m.nan) + " NaN";
    if (m.inf) s += ", " + std::to_string(m.inf) + " inf";
    return s;
  };
  if (o.step < 0) {
    return "the " + o.phase + " '" + o.value.name + "' already holds non-finite values (" +
           magnitude(o.value) + ")";
  }
  const bool several = o.node.find(", ") != std::string::npos;  // a fused kernel's nodes
  std::string s = "first non-finite value: " + o.phase + (several ? " nodes '" : " node '") +
                  o.node + "' (" + o.op + ") produced " + magnitude(o.value);
  s += o.inputs.empty() ? " from no float inputs" : " from inputs:";
  for (const auto& in : o.inputs) s += "\n  " + magnitude(in);
  return s;
}

}  // namespace ampc::rt::cpu
