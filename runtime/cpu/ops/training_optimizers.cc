// The optimizer operators of ONNX's "ai.onnx.preview.training" domain (opset 1): Adagrad,
// Momentum and Adam. One node updates n tensors at once. Inputs: R (learning rate, float
// or double scalar), T (update count, int64 scalar), then n tensors X, n gradients G and n
// of each optimizer state (Adagrad: H; Momentum: V; Adam: V, H). Outputs: the n new X,
// then the n of each new state. Every element is computed in double, as ONNX's reference
// does with its Python-float coefficients, and rounded once to the tensors' type.
#include <array>
#include <cmath>
#include <string>

#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"

namespace ampc::rt::cpu {
namespace {

constexpr char kDomain[] = "ai.onnx.preview.training";

// A scalar input (R or T) as double; fails unless it has one element of an allowed type.
double scalar_input(const OpContext& ctx, int index, const char* name, bool integer) {
  const Tensor& t = ctx.in(index);
  if (t.numel() != 1) ctx.fail(std::string(name) + " must be a scalar, got " + t.type_str());
  if (integer && t.dtype() == DType::kInt64) return static_cast<double>(t.data<int64_t>()[0]);
  if (!integer && t.dtype() == DType::kFloat32) return t.data<float>()[0];
  if (!integer && t.dtype() == DType::kFloat64) return t.data<double>()[0];
  ctx.fail(std::string(name) + " must be " + (integer ? "int64" : "float or double") + ", got " +
           t.type_str());
}

// Momentum has no defaults for its coefficients.
double required_float(const OpContext& ctx, const std::string& name) {
  if (!ctx.has_attr(name)) ctx.fail("attribute '" + name + "' is required");
  return ctx.attr_float(name, 0.0f);
}

// The number n of tensors a node optimizes, from its input count; `names` lists the
// per-tensor inputs (X, G, states...), whose outputs are all but G.
template <size_t K>
int optimized_count(const OpContext& ctx, const std::array<const char*, K>& names) {
  std::string list;
  for (const char* name : names) list += std::string(list.empty() ? "" : ", ") + name;
  const int rest = ctx.num_inputs() - 2;
  const int k = static_cast<int>(K);
  if (rest <= 0 || rest % k != 0) {
    ctx.fail("expects R, T and then " + std::to_string(k) + " inputs (" + list +
             ") per optimized tensor, got " + std::to_string(ctx.num_inputs()) + " inputs");
  }
  const int n = rest / k;
  if (ctx.num_outputs() != (k - 1) * n) {
    ctx.fail("optimizes " + std::to_string(n) + " tensor(s) and so has " +
             std::to_string((k - 1) * n) + " outputs (all of " + list + " but G), got " +
             std::to_string(ctx.num_outputs()));
  }
  return n;
}

// Runs `update` on every element of every optimized tensor. It maps the K input values
// (x, g, states...) to the K - 1 output values (x_new, states_new...), all in double.
template <typename T, size_t K, typename Update>
void update_tensor(OpContext& ctx, const std::array<const Tensor*, K>& in, int n, int j,
                   Update update) {
  std::array<T*, K - 1> out;
  for (size_t k = 0; k + 1 < K; ++k) {
    const int slot = static_cast<int>(k) * n + j;
    out[k] = ctx.output(slot, in[0]->dtype(), in[0]->shape()).template data<T>();
  }
  const int64_t count = in[0]->numel();
  for (int64_t i = 0; i < count; ++i) {
    std::array<double, K> v;
    for (size_t k = 0; k < K; ++k) v[k] = in[k]->template data<T>()[i];
    const std::array<double, K - 1> r = update(v);
    for (size_t k = 0; k + 1 < K; ++k) out[k][i] = static_cast<T>(r[k]);
  }
}

template <size_t K, typename Update>
void run_optimizer(OpContext& ctx, const std::array<const char*, K>& names, Update update) {
  const int n = optimized_count(ctx, names);
  const DType dtype = ctx.in(2).dtype();
  if (dtype != DType::kFloat32 && dtype != DType::kFloat64) ctx.unsupported_dtype(2);
  for (int j = 0; j < n; ++j) {
    std::array<const Tensor*, K> in;
    for (size_t k = 0; k < K; ++k) {
      const int index = 2 + static_cast<int>(k) * n + j;
      in[k] = &ctx.in(index);
      // The spec's T3: one float type for all of them; shapes equal per tensor.
      auto what = [&] {
        return std::string(names[k]) + " of tensor " + std::to_string(j) + " (input " +
               std::to_string(index) + ") is " + in[k]->type_str();
      };
      if (in[k]->dtype() != dtype) {
        ctx.fail(what() + ", but X of tensor 0 is " + ctx.in(2).type_str() +
                 " (all tensors must have one element type)");
      }
      if (in[k]->shape() != in[0]->shape()) {
        ctx.fail(what() + ", but X of tensor " + std::to_string(j) + " is " + in[0]->type_str());
      }
    }
    if (dtype == DType::kFloat32) {
      update_tensor<float>(ctx, in, n, j, update);
    } else {
      update_tensor<double>(ctx, in, n, j, update);
    }
  }
}

void adagrad_op(OpContext& ctx) {
  const double r = scalar_input(ctx, 0, "R", false);
  const double t = scalar_input(ctx, 1, "T", true);
  const double decay = ctx.attr_float("decay_factor", 0.0f);
  const double eps = ctx.attr_float("epsilon", 1e-6f);
  const double norm = ctx.attr_float("norm_coefficient", 0.0f);
  const double rate = r / (1.0 + t * decay);
  run_optimizer<3>(ctx, {"X", "G", "H"}, [=](const std::array<double, 3>& v) {
    const double x = v[0], g = norm * x + v[1];
    const double h = v[2] + g * g;
    return std::array<double, 2>{x - rate * g / (std::sqrt(h) + eps), h};
  });
}

void momentum_op(OpContext& ctx) {
  const double r = scalar_input(ctx, 0, "R", false);
  const double t = scalar_input(ctx, 1, "T", true);
  const double alpha = required_float(ctx, "alpha");
  const double beta_attr = required_float(ctx, "beta");
  // The gradient's coefficient is 1 in the first iteration (T == 0).
  const double beta = t > 0 ? beta_attr : 1.0;
  const double norm = required_float(ctx, "norm_coefficient");
  if (!ctx.has_attr("mode")) ctx.fail("attribute 'mode' is required");
  const std::string mode = ctx.attr_string("mode", "");
  if (mode != "standard" && mode != "nesterov") {
    ctx.fail("attribute 'mode' must be \"standard\" or \"nesterov\", got \"" + mode + "\"");
  }
  const bool nesterov = mode == "nesterov";
  run_optimizer<3>(ctx, {"X", "G", "V"}, [=](const std::array<double, 3>& v) {
    const double x = v[0], g = norm * x + v[1];
    const double v_new = alpha * v[2] + beta * g;
    const double step = nesterov ? g + alpha * v_new : v_new;
    return std::array<double, 2>{x - r * step, v_new};
  });
}

void adam_op(OpContext& ctx) {
  const double r = scalar_input(ctx, 0, "R", false);
  const double t = scalar_input(ctx, 1, "T", true);
  const double alpha = ctx.attr_float("alpha", 0.9f);
  const double beta = ctx.attr_float("beta", 0.999f);
  const double eps = ctx.attr_float("epsilon", 1e-6f);
  const double norm = ctx.attr_float("norm_coefficient", 0.0f);
  const double post = ctx.attr_float("norm_coefficient_post", 0.0f);
  // Bias correction of both moments, folded into the learning rate (none before T > 0).
  const double rate =
      t > 0 ? r * std::sqrt(1.0 - std::pow(beta, t)) / (1.0 - std::pow(alpha, t)) : r;
  run_optimizer<4>(ctx, {"X", "G", "V", "H"}, [=](const std::array<double, 4>& v) {
    const double x = v[0], g = norm * x + v[1];
    const double v_new = alpha * v[2] + (1.0 - alpha) * g;
    const double h_new = beta * v[3] + (1.0 - beta) * g * g;
    const double x_new = x - rate * v_new / (std::sqrt(h_new) + eps);
    return std::array<double, 3>{(1.0 - post) * x_new, v_new, h_new};
  });
}

}  // namespace

void register_training_optimizer_ops(OpRegistry& r) {
  r.add("Adagrad", adagrad_op, kDomain);
  r.add("Momentum", momentum_op, kDomain);
  r.add("Adam", adam_op, kDomain);
}

}  // namespace ampc::rt::cpu
