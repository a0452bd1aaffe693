#include "passes/autodiff/gradient_registry.h"

#include <stdexcept>

#include "base/error.h"

namespace ampc::passes::autodiff {

int64_t GradContext::attr_int(const std::string& name, int64_t fallback) const {
  const auto* a = node_.attr(name);
  return a ? a->i : fallback;
}

float GradContext::attr_float(const std::string& name, float fallback) const {
  const auto* a = node_.attr(name);
  return a ? a->f : fallback;
}

std::vector<int64_t> GradContext::const_ints(size_t i, std::vector<int64_t> fallback) const {
  const ir::Value* v = input(i);
  if (!v) return fallback;
  if (!v->initializer) fail("input " + std::to_string(i) + " must be constant for training");
  auto values = ir::int_values(*v->initializer);
  if (!values) fail("input " + std::to_string(i) + " must be int32 or int64");
  return *values;
}

void GradContext::fail(const std::string& what) const {
  throw Error("gradient of node " + node_.label() + ": " + what);
}

void GradientRegistry::add(std::string_view op_type, GradRule rule) {
  // "ampc.Conv" here would be an op of the default domain named so, which no node finds.
  if (op_type.find('.') != std::string_view::npos)
    throw std::logic_error("gradient rule for '" + std::string(op_type) +
                           "': give another domain's op as an OpKey");
  add(ops::OpKey("", op_type), std::move(rule));
}

const GradRule* GradientRegistry::find(const ops::OpKey& key) const {
  return rules_.find(key);
}

std::vector<ops::OpKey> GradientRegistry::keys() const {
  return rules_.keys();
}

const GradientRegistry& GradientRegistry::instance() {
  static const GradientRegistry registry = [] {
    GradientRegistry r;
    register_elementwise_gradients(r);
    register_linear_gradients(r);
    register_shape_gradients(r);
    register_reduce_gradients(r);
    register_index_gradients(r);
    register_pad_gradients(r);
    register_softmax_gradients(r);
    register_nn_gradients(r);
    register_comm_gradients(r);
    return r;
  }();
  return registry;
}

}  // namespace ampc::passes::autodiff
