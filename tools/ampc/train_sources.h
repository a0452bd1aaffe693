// What `ampc train` trains on: the training plan (a plan file, or the ONNX model compiled for
// training with the run's options) and the data (training and held-out).
#pragma once

#include <optional>
#include <utility>

#include "runtime/data/dataset.h"
#include "runtime/plan/plan.pb.h"
#include "tools/ampc/train_args.h"

namespace ampc::cli {

// The options that cannot work together, checked before anything is loaded.
void check_train_args(const TrainArgs& args);

// The plan file, or the ONNX model compiled for `args.target` on `args.world` ranks.
plan::Plan training_plan(TrainArgs& args);

// The training data and the held-out data (--eval DATA, or the last --holdout share of
// --data; none when neither is given).
std::pair<rt::data::Dataset, std::optional<rt::data::Dataset>> open_data(const TrainArgs& args);

}  // namespace ampc::cli
