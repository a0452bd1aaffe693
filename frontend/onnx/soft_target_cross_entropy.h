#pragma once

#include <onnx/onnx_pb.h>

namespace ampc::onnx_io {

// torch.nn.functional.cross_entropy with class probabilities as the target (soft labels:
// mixup, distillation, label smoothing written out) is exported by torch as an ONNX
// SoftmaxCrossEntropyLoss whose labels are floats of the scores' shape, which the operator
// does not define (its labels are class indices). Each such node becomes what PyTorch
// computes, in ONNX ops of the model's opset:
//
//   log_prob = LogSoftmax(scores, axis 1)                       (the node's second output)
//   per      = -ReduceSum(log_prob * probs [* weight over axis 1], axis 1)
//   loss     = ReduceMean(per) | ReduceSum(per) | per           (reduction mean | sum | none)
//
// The mean divides by the batch and spatial size, not by the weights (PyTorch's rule for
// probability targets); ignore_index does not apply to them and is ignored, as PyTorch does.
// Call before shape inference: the labels' types come from inferring a sketch of the model
// (no weights copied) where they are not declared. Returns the number of nodes rewritten.
int expand_soft_target_cross_entropy(onnx::ModelProto& proto);

}  // namespace ampc::onnx_io
