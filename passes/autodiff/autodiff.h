// Reverse-mode differentiation of a scalar loss (or of several: the gradients of their sum)
// with respect to the trainable parameters. Gradient nodes are appended to the main graph;
// gradients of a value read several times are summed. An op without a gradient rule is an
// error naming the op and the node.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/autodiff/stop_gradient.h"

namespace ampc::passes {

struct AutodiffOptions {
  std::string loss;                 // graph output to differentiate; empty: the only output
  std::vector<std::string> freeze;  // glob patterns (fnmatch) of parameters not to train
  // Several losses (`--loss A --loss B`): when not empty, replaces `loss`; the gradients are
  // those of the losses' sum, each loss seeded with the same seed. (The `= {}` lets
  // designated initializers that omit it compile without -Wmissing-field-initializers.)
  std::vector<std::string> losses = {};
};

struct ParameterGradient {
  ir::Value* parameter;
  ir::Value* gradient;
};

// The ONNX metadata key under which an export (ampc.export, ampc.compile of a torch module)
// lists, one per line, the initializers torch.optim does not train: buffers and parameters
// with requires_grad=False. torch.onnx.export writes them like the parameters.
inline constexpr const char* kUntrainedKey = "ampc.untrained";

// Trainable parameters: float initializers of the source model (Value::from_model) that are
// not graph inputs, minus frozen ones and those the model's kUntrainedKey metadata lists.
std::vector<ir::Value*> trainable_parameters(const ir::Model& model,
                                             const AutodiffOptions& options);

// The gradients of the loss with respect to trainable_parameters(model, options).
// The backward stops where the model's kStopGradientKey metadata says (stop_gradient.h).
// Returns one entry per parameter that the loss depends on, in initializer order.
// `seed`, a float scalar of the graph, seeds the backward instead of 1 (the loss scale:
// every gradient is then seed times the true one); it is cast and reshaped to the loss's type.
// With several losses every one is seeded with it. A loss named twice, or one that depends
// on no trainable parameter, is an error.
std::vector<ParameterGradient> differentiate(ir::Model& model, const AutodiffOptions& options,
                                             ir::Value* seed = nullptr);

// The reverse sweep that differentiate() and the Gradient op expansion (gradient_op.h)
// share: appends to `g` the nodes that compute, for each x of `xs`, the gradient of y with
// respect to x given `seed` as y's gradient (a value of y's type; ones for dy/dx). Only the
// nodes `g` has when called are differentiated. The entry of an x that y does not depend on
// is null. Nothing flows back through the values of `stops`.
std::vector<ir::Value*> gradients_of(ir::Graph& g, ir::Value* y, ir::Value* seed,
                                     const std::vector<ir::Value*>& xs,
                                     const StopGradients& stops = {});

// The same for the sum of several ys, each with its seed (pairs of y, seed).
struct SeededOutput {
  ir::Value* y;
  ir::Value* seed;
};
std::vector<ir::Value*> gradients_of(ir::Graph& g, const std::vector<SeededOutput>& ys,
                                     const std::vector<ir::Value*>& xs,
                                     const StopGradients& stops = {});

// The name prefix of the nodes autodiff writes for the gradient of the forward node named
// `forward_name`; for a forward prefix, that of the gradients of every node it names.
std::string gradient_name_prefix(const std::string& forward_name);

// Gradient ops of ampc's own domain need its schemas and an opset import: adds both when a
// node from `first_node` on is of that domain.
void import_ampc_domain_if_used(ir::Model& model, size_t first_node);

}  // namespace ampc::passes
