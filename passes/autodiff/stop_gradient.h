// Where PyTorch's autograd stops, as the export recorded it. torch.onnx.export writes
// `.detach()` as nothing and the ops a forward computes under torch.no_grad() as ordinary
// ops, so a plain export cannot tell `x + (q - x).detach()` (a straight-through estimator)
// from `q`. ampc's exporter (ampc.export, ampc.compile of a torch module) writes each place
// where autograd stops as an Identity and lists its output under kStopGradientKey; the
// backward does not differentiate through those values, as PyTorch's does not.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/model_metadata.h"

namespace ampc::passes {

// The ONNX metadata key: one value name per line. Present (even empty) when the export
// recorded where autograd stops.
inline constexpr const char* kStopGradientKey = "ampc.stop_gradient";

struct StopGradients {
  // Values whose gradient goes nowhere: the loss depends on them as on constants.
  std::set<const ir::Value*> values;
  // The model records where autograd stops, so Round, Floor, Ceil and Sign can have
  // PyTorch's gradient, 0: a straight-through estimator's detach is then in the graph.
  bool recorded = false;
};

// The model's stop-gradient values (names no value of the graph has any more are left out:
// a detach whose result nothing reads is gone after dead-code elimination).
StopGradients stop_gradients(const ir::Model& model);

// The ops whose gradient PyTorch defines as 0 everywhere: piecewise constant functions.
bool is_step_function(const ir::Node& n);

// The first node of `g` computing a + (b - a) (either operand order) whose result is in
// `differentiated`: the form a plain export leaves of a straight-through estimator
// a + (b - a).detach() (also Gumbel-softmax's y_hard - y_soft.detach() + y_soft), whose
// gradient PyTorch passes to a alone. Nobody writes b that way otherwise, so in a model that
// does not record where autograd stops it is refused rather than differentiated; nullptr if
// there is none.
const ir::Node* lost_detach(const ir::Graph& g, const std::set<const ir::Value*>& differentiated);

}  // namespace ampc::passes
