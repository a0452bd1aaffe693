#include "passes/loss_scaling.h"

#include <cmath>
#include <cstring>
#include <set>

#include "base/error.h"
#include "ops/schemas/amp_schemas.h"
#include "ops/schemas/ampc_schemas.h"
#include "passes/autodiff/grad_builder.h"

namespace ampc::passes {
namespace {

using autodiff::attrs;
using autodiff::GradBuilder;
using ir::Attribute;
using ir::Value;

const ir::TensorType kF32Scalar{DType::kFloat32, std::vector<int64_t>{}};
const ir::TensorType kI32Scalar{DType::kInt32, std::vector<int64_t>{}};
const ir::TensorType kBoolScalar{DType::kBool, std::vector<int64_t>{}};

// A 0-d initializer named `name` holding the bytes of `value`.
template <typename T>
Value* scalar_initializer(ir::Model& model, const std::string& name, DType dtype, T value) {
  ir::Graph& g = *model.graph;
  if (g.find_value(name))
    throw Error("cannot add loss-scaling state '" + name +
                "': the model already has a value of that name");
  ir::Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.bytes.resize(sizeof(T));
  std::memcpy(t.bytes.data(), &value, sizeof(T));
  Value* v = g.add_value(name, {dtype, std::vector<int64_t>{}});
  v->initializer = std::make_unique<ir::Tensor>(std::move(t));
  g.initializers.push_back(v);
  return v;
}

// An fp32 value of the options (a scale or a bound): positive and finite once rounded.
float positive_f32(double value, const std::string& what) {
  const auto f = static_cast<float>(value);
  if (!(f > 0) || !std::isfinite(f))
    throw Error(what + " must be a positive, finite fp32 number, got " + std::to_string(value));
  return f;
}

void rename(ir::Model& model, Value* v, const std::string& name) {
  if (model.graph->find_value(name))
    throw Error("cannot name the loss scaler's '" + name +
                "': the model already has a value of that name");
  model.graph->rename_value(v, name);
}

// The 16-bit gradient an fp32 gradient widens, when it is nothing else: the gradient of
// autocast's Cast of an fp32 parameter to fp16 or bf16 (an exact widening), read by nobody yet.
// Null otherwise.
Value* sixteen_bit_source(Value* gradient) {
  const ir::Node* n = gradient->producer;
  if (!n || n->op_type != "Cast" || !n->domain.empty() || n->inputs.size() != 1 ||
      !gradient->uses.empty() || gradient->type.dtype != DType::kFloat32)
    return nullptr;
  Value* source = n->inputs[0];
  const DType t = source ? source->type.dtype : DType::kUndefined;
  return t == DType::kFloat16 || t == DType::kBFloat16 ? source : nullptr;
}

}  // namespace

LossScaleConfig resolve_loss_scale(const LossScaleOptions& o) {
  LossScaleConfig c;
  c.options = o;
  const std::string& m = o.mode;
  if (m.empty()) {
    // amp-semantics.md section 3: fp16 needs scaling; bf16 has fp32's exponent range.
    c.mode = o.precision == Precision::kFP16 ? "dynamic" : "none";
  } else if (m == "dynamic" || m == "none") {
    c.mode = m;
  } else if (m.rfind("static:", 0) == 0) {
    c.mode = "static";
    char* end = nullptr;
    const std::string s = m.substr(7);
    c.static_scale = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0')
      throw Error("--loss-scale " + m + ": expected static:S with a number S, e.g. static:1024");
    positive_f32(c.static_scale, "--loss-scale static:S");
  } else {
    throw Error("--loss-scale " + m + ": expected dynamic, static:S or none");
  }
  if (c.mode == "dynamic") {
    positive_f32(o.init_scale, "--init-scale");
    if (!(o.growth_factor >= 1.0) || !std::isfinite(o.growth_factor))
      throw Error("--growth-factor must be at least 1, got " + std::to_string(o.growth_factor));
    if (!(o.backoff_factor > 0.0 && o.backoff_factor <= 1.0))
      throw Error("--backoff-factor must be in (0, 1], got " + std::to_string(o.backoff_factor));
    if (o.growth_interval < 1)
      throw Error("--growth-interval must be at least 1, got " + std::to_string(o.growth_interval));
    if (o.min_scale) positive_f32(*o.min_scale, "--min-scale");
    if (o.max_scale) positive_f32(*o.max_scale, "--max-scale");
    if (o.min_scale && o.max_scale && *o.min_scale > *o.max_scale)
      throw Error("--min-scale " + std::to_string(*o.min_scale) + " is above --max-scale " +
                  std::to_string(*o.max_scale));
  } else if (o.min_scale || o.max_scale) {
    throw Error("--min-scale and --max-scale bound the dynamic loss scale; the loss scale is " +
                c.mode);
  }
  if (o.clip_grad_norm < 0 || !std::isfinite(o.clip_grad_norm))
    throw Error("--clip-grad-norm must be positive, got " + std::to_string(o.clip_grad_norm));
  return c;
}

LossScaleState add_loss_scale_state(ir::Model& model, const LossScaleConfig& c) {
  LossScaleState s;
  if (c.mode == "dynamic") {
    s.scale = scalar_initializer(model, kScaleName, DType::kFloat32,
                                 positive_f32(c.options.init_scale, "--init-scale"));
    s.growth_tracker =
        scalar_initializer(model, kGrowthTrackerName, DType::kInt32, static_cast<int32_t>(0));
  } else if (c.mode == "static") {
    s.scale =
        scalar_initializer(model, kScaleName, DType::kFloat32, static_cast<float>(c.static_scale));
  }
  return s;
}

Value* unscale_and_check(ir::Model& model, const LossScaleState& state,
                         std::vector<ParameterGradient>& gradients, const LossScaleConfig& c) {
  if (!c.checks()) return nullptr;
  for (const auto& pg : gradients) {
    // torch: "Attempting to unscale FP16 gradients." Masters must be fp32 (or fp64).
    const DType t = pg.gradient->type.dtype;
    if (t != DType::kFloat32 && t != DType::kFloat64) {
      throw Error("cannot unscale the " + std::string(dtype_name(t)) + " gradient of parameter '" +
                  pg.parameter->name +
                  "': loss scaling needs fp32 master weights (as torch refuses to unscale FP16 "
                  "gradients)");
    }
  }
  ops::register_amp_schemas();
  const size_t first_node = model.graph->nodes.size();
  GradBuilder b(*model.graph, "amp");
  // inv_scale = fp32(1 / fp64(scale)), as torch's GradScaler computes it.
  Value* inv;
  if (state.scale) {
    Value* s64 = b.op("Cast", {state.scale}, {DType::kFloat64, std::vector<int64_t>{}},
                      attrs(Attribute::make_int("to", static_cast<int64_t>(DType::kFloat64))));
    Value* r64 = b.op("Reciprocal", {s64}, s64->type);
    inv = b.op("Cast", {r64}, kF32Scalar,
               attrs(Attribute::make_int("to", static_cast<int64_t>(DType::kFloat32))));
  } else {
    inv = b.scalar(1.0, DType::kFloat32);  // --skip-nonfinite without scaling
  }
  rename(model, inv, "amp.inv_scale");
  std::vector<Value*> inputs{inv};
  std::vector<ir::TensorType> types{kBoolScalar};
  std::vector<Value*> widened(gradients.size(), nullptr);
  for (size_t i = 0; i < gradients.size(); ++i) {
    widened[i] = sixteen_bit_source(gradients[i].gradient);
    Value* g = widened[i] ? widened[i] : gradients[i].gradient;
    inputs.push_back(g);
    types.push_back(g->type);
  }
  const auto outs = b.op_n("UnscaleCheck", inputs, types, {}, ops::kAmpcDomain);
  rename(model, outs[0], kFoundInfName);
  ir::Node* check = outs[0]->producer;
  std::set<const Value*> unread;
  for (size_t i = 0; i < gradients.size(); ++i) {
    if (!widened[i]) {
      gradients[i].gradient = outs[i + 1];
      continue;
    }
    // Checked in 16 bits, unscaled where it is read: fp32(g16) * inv_scale, the multiply
    // UnscaleCheck makes, so the optimizer's update kernel computes it and no fp32 copy of
    // the gradient is ever stored.
    ir::set_output(check, i + 1, nullptr);
    unread.insert(outs[i + 1]);
    Value* g32 = b.op("Cast", {widened[i]}, gradients[i].gradient->type,
                      attrs(Attribute::make_int("to", static_cast<int64_t>(DType::kFloat32))));
    gradients[i].gradient = b.op("Mul", {g32, inv}, g32->type);
  }
  model.graph->erase_values_if([&](const ir::Value& v) { return unread.count(&v) > 0; });
  import_ampc_domain_if_used(model, first_node);
  return outs[0];
}

void add_scale_update(ir::Model& model, const LossScaleState& state, Value* found_inf,
                      const LossScaleConfig& c, Value* apply) {
  if (c.mode != "dynamic") return;
  if (!found_inf || !state.scale || !state.growth_tracker)
    throw Error("internal: the scale update needs the scale, the growth tracker and found_inf");
  const LossScaleOptions& o = c.options;
  GradBuilder b(*model.graph, "amp");
  std::vector<Attribute> a =
      attrs(Attribute::make_float("growth_factor", static_cast<float>(o.growth_factor)),
            Attribute::make_float("backoff_factor", static_cast<float>(o.backoff_factor)),
            Attribute::make_int("growth_interval", o.growth_interval));
  if (o.min_scale)
    a.push_back(Attribute::make_float("min_scale", static_cast<float>(*o.min_scale)));
  if (o.max_scale)
    a.push_back(Attribute::make_float("max_scale", static_cast<float>(*o.max_scale)));
  const auto outs = b.op_n("UpdateScale", {state.scale, state.growth_tracker, found_inf},
                           {kF32Scalar, kI32Scalar}, std::move(a), ops::kAmpcDomain);
  Value* scale = outs[0];
  Value* tracker = outs[1];
  if (apply) {  // micro-batches before the last of a step leave the scaler as it is
    scale = b.op("Where", {apply, scale, state.scale}, kF32Scalar);
    tracker = b.op("Where", {apply, tracker, state.growth_tracker}, kI32Scalar);
  }
  model.state_updates.push_back({state.scale, scale});
  model.state_updates.push_back({state.growth_tracker, tracker});
}

}  // namespace ampc::passes
