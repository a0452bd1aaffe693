#include "python/src/trainer.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/number_format.h"
#include "driver/pipeline.h"
#include "runtime/io/checkpoint.h"
#include "runtime/plan/plan_file.h"
#include "tools/ampc/device_backend.h"

namespace ampc::python {
namespace {

// The options that only shape a model's training step (not the precision and autocast's
// options, the shapes or the lowering, which a forward plan has too).
bool training_step_option(const std::string& name) {
  static const char* const kOthers[] = {"precision", "allow",  "deny",           "follow",
                                        "keep_fp32", "policy", "recast_weights", "input_shapes",
                                        "fusion",    "target"};
  for (const char* other : kOthers)
    if (name == other) return false;
  return true;
}

// The first axis every input has, 0 when they do not share one (or one is a scalar).
int64_t common_first_axis(const std::map<std::string, std::pair<DType, std::vector<int64_t>>>& t) {
  int64_t batch = -1;
  for (const auto& [name, type] : t) {
    const int64_t first = type.second.empty() ? 0 : type.second[0];
    if (batch >= 0 && batch != first) return 0;
    batch = first;
  }
  return std::max<int64_t>(batch, 0);
}

}  // namespace

plan::Plan training_plan(const std::string& path, const TrainOptions& t,
                         std::vector<std::string>& warnings) {
  if (plan::looks_like_plan(path)) {
    if (!t.given.empty()) {
      std::string names;
      for (const auto& n : t.given) names += (names.empty() ? "" : ", ") + n;
      throw Error(names + ": '" + path +
                  "' is compiled already, so these cannot change it; give them to `ampc "
                  "compile`, or train the ONNX model");
    }
    plan::Plan p = plan::load_plan(path);
    if (p.state_updates_size() == 0)
      throw Error("'" + path + "' is a forward plan; compile it with `ampc compile --train`");
    return p;
  }
  compiler::CompileOptions o;
  o.train = true;
  for (const auto& spec : t.input_shapes) onnx_io::parse_input_shape(spec, o.import);
  o.autocast.precision = passes::parse_precision(t.precision);
  o.autocast.allow = t.allow;
  o.autocast.deny = t.deny;
  o.autocast.follow = t.follow;
  o.autocast.keep_fp32 = t.keep_fp32;
  o.autocast.policy_file = t.policy;
  o.recast_weights = t.recast_weights;
  o.recompute_elementwise = t.recompute_elementwise;
  if (t.batchnorm_running_var) {
    if (*t.batchnorm_running_var != "unbiased" && *t.batchnorm_running_var != "biased")
      throw Error("batchnorm_running_var '" + *t.batchnorm_running_var +
                  "': expected 'unbiased' or 'biased'");
    o.unbiased_running_variance = *t.batchnorm_running_var == "unbiased";
  }
  if (t.optimizer) o.optimizer.kind = *t.optimizer;
  if (o.optimizer.kind != "sgd" && o.optimizer.kind != "adam" && o.optimizer.kind != "adamw")
    throw Error("optimizer '" + o.optimizer.kind + "': expected sgd, adam or adamw");
  if (t.lr) o.optimizer.lr = *t.lr;
  if (t.momentum) o.optimizer.momentum = *t.momentum;
  if (t.weight_decay) o.optimizer.weight_decay = *t.weight_decay;
  if (t.eps) o.optimizer.eps = *t.eps;
  if (t.betas) std::tie(o.optimizer.beta1, o.optimizer.beta2) = *t.betas;
  o.optimizer.nesterov = t.nesterov;
  auto& schedule = o.optimizer.schedule;
  if (t.lr_schedule) schedule.kind = *t.lr_schedule;
  if (t.warmup_steps) schedule.warmup_steps = *t.warmup_steps;
  if (t.warmup_start_factor) schedule.warmup_start_factor = *t.warmup_start_factor;
  if (t.total_steps) schedule.total_steps = *t.total_steps;
  if (t.step_size) schedule.step_size = *t.step_size;
  if (t.gamma) schedule.gamma = *t.gamma;
  if (t.min_lr_factor) schedule.min_lr_factor = *t.min_lr_factor;
  o.optimizer.no_decay = t.no_decay;
  o.optimizer.lr_mult = t.lr_mult;
  if (t.loss_scale) o.loss_scale.mode = *t.loss_scale;
  if (t.init_scale) o.loss_scale.init_scale = *t.init_scale;
  if (t.growth_factor) o.loss_scale.growth_factor = *t.growth_factor;
  if (t.backoff_factor) o.loss_scale.backoff_factor = *t.backoff_factor;
  if (t.growth_interval) o.loss_scale.growth_interval = *t.growth_interval;
  o.loss_scale.min_scale = t.min_scale;
  o.loss_scale.max_scale = t.max_scale;
  o.loss_scale.skip_nonfinite = t.skip_nonfinite;
  if (t.clip_grad_norm) o.loss_scale.clip_grad_norm = *t.clip_grad_norm;
  o.loss_scale.log_grad_norm = t.log_grad_norm;
  if (t.accum_steps) {
    if (*t.accum_steps < 1) throw Error("accum_steps must be at least 1");
    o.accum_steps = *t.accum_steps;
  }
  o.autodiff.freeze = t.freeze;
  o.autodiff.losses = t.losses;
  for (const auto& name : t.given) o.optimizer_options_given |= training_step_option(name);
  o.lowering.fuse = t.fusion;
  o.lowering.target = t.target;
  // As `ampc train MODEL.onnx --device cuda`: compiled for the GPU at hand (a machine without
  // one fails here, "no CUDA device", before anything is compiled).
  const cli::Device device = cli::parse_device(t.device);
  if (device.cuda && t.target == "cpu") o.lowering.target = cli::compile_target(device);
  o.warn = [&warnings](const std::string& line) { warnings.push_back(line); };
  return compiler::compile_file(path, o);
}

Trainer::Trainer(plan::Plan plan, std::string model, uint64_t seed, const std::string& device)
    : compiled_(plan), model_(std::move(model)), seed_(seed) {
  if (plan.outputs_size() < 1) throw Error("the plan has no output to report as the loss");
  losses_ = cli::loss_names(plan);
  accum_ = cli::accum_steps_of(plan);
  amp_ = cli::amp_outputs(plan);
  types_ = cli::plan_input_types(plan);
  if (accum_ > 1) {
    inputs_ = cli::plan_inputs(plan);  // micro-batches are cut along a common batch axis
    batch_ = inputs_.batch;
  } else {
    batch_ = common_first_axis(types_);
  }
  // The command line's backend (and its check that the plan fits the machine's memory).
  backend_ = cli::make_backend(std::move(plan), cli::parse_device(device), 1, model_);
  backend_->set_random_state(seed_, 0);
  lr_ = cli::compiled_lr(*backend_);
  const auto state = backend_->state();
  // The model's own state (parameters, running statistics), not the optimizer's or the
  // loss scaler's, as the compiler recorded it.
  for (const auto& b : compiled_.buffers())
    if (b.role() == plan::STATE && b.from_model() && state.count(b.name()))
      model_state_.push_back(b.name());
}

std::map<std::string, std::pair<DType, std::vector<int64_t>>> Trainer::step_inputs() const {
  if (accum_ == 1) return types_;
  std::map<std::string, std::pair<DType, std::vector<int64_t>>> out;
  for (const auto& [name, spec] : inputs_.specs) {
    std::vector<int64_t> shape{accum_ * inputs_.batch};
    shape.insert(shape.end(), spec.sample_shape.begin(), spec.sample_shape.end());
    out[name] = {spec.dtype, shape};
  }
  return out;
}

StepResult Trainer::step(const std::map<std::string, BorrowedArray>& feeds) {
  const auto expected = step_inputs();
  for (const auto& [name, a] : feeds) {
    if (!expected.count(name)) {
      std::string known;
      for (const auto& [n, _] : expected) known += (known.empty() ? "'" : ", '") + n + "'";
      throw Error("the plan has no input named '" + name + "' (its inputs: " + known + ")");
    }
  }
  for (const auto& [name, type] : expected) {
    const auto it = feeds.find(name);
    const std::string want = type_str(type.first, type.second);
    if (it == feeds.end()) throw Error("input '" + name + "' (" + want + ") is not given");
    if (it->second.dtype != type.first || it->second.shape != type.second) {
      std::string m = "input '" + name + "' must be " + want + ", got " +
                      type_str(it->second.dtype, it->second.shape);
      if (accum_ > 1) m += " (the " + std::to_string(accum_) + " micro-batches of a step, stacked)";
      throw Error(m);
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  addresses_.clear();
  StepResult r;
  std::vector<double> loss_sums(losses_.size(), 0.0);
  std::map<std::string, rt::Tensor> outputs;
  for (int64_t k = 0; k < accum_; ++k) {
    std::map<std::string, rt::Tensor> batch;
    for (const auto& [name, a] : feeds) {
      BorrowedArray micro = a;
      if (accum_ > 1) micro.shape[0] = inputs_.batch;
      const size_t bytes = static_cast<size_t>(rt::numel_of(micro.shape)) * dtype_size(a.dtype);
      micro.data = a.data + static_cast<size_t>(k) * bytes;
      const auto& t = batch.emplace(name, tensor_over(micro)).first->second;
      if (k == 0) addresses_[name] = reinterpret_cast<uintptr_t>(t.raw());
    }
    outputs = backend_->run(batch);
    for (size_t i = 0; i < losses_.size(); ++i)
      loss_sums[i] += cli::scalar_of(outputs.at(losses_[i]));
  }
  r.step = ++steps_done_;
  for (size_t i = 0; i < losses_.size(); ++i) {
    const double mean = loss_sums[i] / static_cast<double>(accum_);
    r.loss += mean;
    if (losses_.size() > 1) r.losses[losses_[i]] = static_cast<float>(mean);
  }
  r.loss = static_cast<float>(r.loss);
  // As `ampc train`: with the non-finite check compiled in, the plan has skipped such a step.
  if (!std::isfinite(r.loss) && amp_.found_inf.empty())
    throw Error("step " + std::to_string(r.step) + ": the loss is " +
                format_number(static_cast<float>(r.loss)));
  r.skipped = !amp_.found_inf.empty() && outputs.at(amp_.found_inf).data<bool>()[0];
  if (!amp_.scale.empty()) r.scale = cli::scalar_of(outputs.at(amp_.scale));
  if (!amp_.grad_norm.empty()) r.grad_norm = cli::scalar_of(outputs.at(amp_.grad_norm));
  r.lr = amp_.step_lr.empty() ? lr_ : cli::scalar_of(outputs.at(amp_.step_lr));
  return r;
}

std::map<std::string, rt::Tensor> Trainer::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return backend_->state();
}

void Trainer::update_state(const std::map<std::string, rt::Tensor>& values) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto state = backend_->state();
  for (const auto& [name, t] : values) {
    auto it = state.find(name);
    if (it == state.end()) throw Error("the plan has no state named '" + name + "'");
    it->second = t;
  }
  backend_->load_state(state);  // checks every type and shape first
}

void Trainer::save(const std::string& path, std::optional<int64_t> data_position) const {
  std::lock_guard<std::mutex> lock(mutex_);
  rt::io::write_checkpoint(backend_->plan(), backend_->state(),
                           {steps_done_, data_position.value_or(steps_done_ * accum_)}, path);
}

void Trainer::load_checkpoint(const std::string& path) {
  const auto ckpt = rt::io::read_checkpoint(path);
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    backend_->load_state(ckpt.initializers);
  } catch (const Error& e) {
    throw Error("checkpoint " + path + " does not fit this plan: " + e.what());
  }
  steps_done_ = ckpt.progress.step;
  // Dropout masks follow the seed and the step, as in a resumed `ampc train`.
  backend_->set_random_state(seed_, steps_done_ * accum_);
}

void Trainer::save_plan(const std::string& path) const {
  plan::save_plan(compiled_, path);
}

cli::EvalResult Trainer::evaluate(const rt::data::Dataset& data) const {
  const auto state = this->state();
  return cli::evaluate(backend_->plan(), state, losses_[0], data);
}

}  // namespace ampc::python
