// Gradient rules, keyed by op type, one file per op family (rules_*.cc). A rule reads the
// forward node and the gradients of its outputs, and sets the gradients of the inputs that
// need one, building them from standard ONNX ops where one exists.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/op_key.h"
#include "ops/op_map.h"
#include "passes/autodiff/grad_builder.h"

namespace ampc::passes::autodiff {

class GradContext {
 public:
  GradContext(const ir::Node& node, std::vector<ir::Value*> output_grads, std::vector<bool> needs,
              GradBuilder& builder)
      : node_(node),
        output_grads_(std::move(output_grads)),
        needs_(std::move(needs)),
        input_grads_(node.inputs.size(), nullptr),
        b(builder) {}

  const ir::Node& node() const { return node_; }
  ir::Value* input(size_t i) const { return i < node_.inputs.size() ? node_.inputs[i] : nullptr; }
  ir::Value* output(size_t i) const {
    return i < node_.outputs.size() ? node_.outputs[i] : nullptr;
  }
  // dL/d(output i), or null when no gradient reaches that output.
  ir::Value* output_grad(size_t i) const {
    return i < output_grads_.size() ? output_grads_[i] : nullptr;
  }
  // Whether input i needs a gradient (it leads back to a trainable parameter).
  bool needs(size_t i) const { return i < needs_.size() && needs_[i]; }
  void set_input_grad(size_t i, ir::Value* grad) { input_grads_.at(i) = grad; }
  const std::vector<ir::Value*>& input_grads() const { return input_grads_; }

  int64_t attr_int(const std::string& name, int64_t fallback) const;
  float attr_float(const std::string& name, float fallback) const;
  [[noreturn]] void fail(const std::string& what) const;
  // The values of constant integer input i (an int32 or int64 initializer), or `fallback` when
  // it is omitted; a computed one fails (training needs it constant).
  std::vector<int64_t> const_ints(size_t i, std::vector<int64_t> fallback = {}) const;

 private:
  const ir::Node& node_;
  std::vector<ir::Value*> output_grads_;
  std::vector<bool> needs_;
  std::vector<ir::Value*> input_grads_;

 public:
  GradBuilder& b;
};

using GradRule = std::function<void(GradContext&)>;

// Gradient rules keyed by op (ops/op_key.h, the key every per-op registry uses).
class GradientRegistry {
 public:
  // An op of the default domain; another domain's op is added by its OpKey.
  void add(std::string_view op_type, GradRule rule);
  // Throws std::logic_error when the op already has one (ops/op_map.h).
  void add(const ops::OpKey& key, GradRule rule) { rules_.add(key, std::move(rule)); }
  const GradRule* find(const ops::OpKey& key) const;
  std::vector<ops::OpKey> keys() const;  // every op with a rule (ampc ops)
  static const GradientRegistry& instance();

 private:
  ops::OpMap<GradRule> rules_{"gradient rule"};
};

// One per family file.
void register_elementwise_gradients(GradientRegistry& r);  // rules_elementwise.cc
void register_linear_gradients(GradientRegistry& r);       // rules_linear.cc: MatMul, Gemm
void register_shape_gradients(GradientRegistry& r);   // rules_shape.cc: Reshape, Transpose, ...
void register_reduce_gradients(GradientRegistry& r);  // rules_reduce.cc: ReduceSum, ReduceMean
void register_index_gradients(
    GradientRegistry& r);  // rules_index.cc: Gather, Concat, Slice, Where, ...
void register_pad_gradients(GradientRegistry& r);  // rules_pad.cc: Pad, every mode
void register_softmax_gradients(
    GradientRegistry& r);                         // rules_softmax.cc: Softmax, LogSoftmax, losses
void register_nn_gradients(GradientRegistry& r);  // rules_nn.cc: Conv, pooling, normalisation
// rules_comm.cc: ampc.AllReduceSum (synchronised BatchNorm), ampc.BatchStatistics
void register_comm_gradients(GradientRegistry& r);

}  // namespace ampc::passes::autodiff
