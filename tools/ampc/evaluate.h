// Held-out evaluation for `ampc train --eval`: the training plan's embedded model (its
// inference graph) with the current trained state, switched to inference mode
// (passes/inference_mode.h), compiled as a forward plan (static shapes: the training batch
// size) and run over every full batch of the held-out data. The samples after the last whole
// batch are evaluated too when the loss is a classification loss with mean reduction whose
// labels come from the data: the last B samples run as one batch with the labels of the
// samples already counted set to ignore_index (added when the loss has none), so the loss
// and accuracy count each sample once. Other losses leave those samples out and say so.
// Reports the mean loss (over labelled positions) and, when the loss is a classification loss
// (SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss, possibly behind Identity/Cast),
// the accuracy: the share of labelled positions (labels equal to ignore_index do not count)
// whose highest score is the label.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "runtime/data/dataset.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::cli {

struct EvalResult {
  int64_t samples = 0;         // evaluated
  int64_t unused_samples = 0;  // after the last whole batch, when they cannot be masked
  double loss = 0;             // mean over the labelled positions (classification), else batches
  std::optional<double> accuracy;
  int64_t labelled = 0;  // positions that count for the accuracy
};

class DataParallelRun;

// With `dp` (several ranks), each rank evaluates every world-th batch and the results are
// combined over the ranks: every rank returns the result of the whole set.
EvalResult evaluate(const plan::Plan& training_plan, const std::map<std::string, rt::Tensor>& state,
                    const std::string& loss_name, const rt::data::Dataset& data,
                    DataParallelRun* dp = nullptr);

// "360 samples: loss 0.1034, accuracy 96.94%"
std::string describe(const EvalResult& r);

}  // namespace ampc::cli
