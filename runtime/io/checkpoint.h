// Training checkpoints: an ONNX model in ONNX's training format (the plan's embedded
// training model, Plan.training_model) whose initializers hold the trained values of every
// piece of state (parameters, optimizer moments and step, running statistics), plus where
// training stands in metadata_props. Any ONNX tool can read it; its main graph is the
// inference model with the trained weights. `ampc train --resume` reads it back.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <onnx/onnx_pb.h>

#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::rt::io {

// Where a training run stands after an optimizer step.
struct TrainingProgress {
  int64_t step = 0;           // optimizer steps done
  int64_t data_position = 0;  // the next batch index (runtime/data/batcher.h)
};

// The plan's training model with `state` as the values of its state initializers. Throws
// ampc::Error when the plan embeds no training model or a state value is missing.
onnx::ModelProto model_with_state(const plan::Plan& plan,
                                  const std::map<std::string, Tensor>& state);

// model_with_state + `progress` in metadata_props, written atomically (temporary file, then
// rename), so an interrupted run never leaves a torn checkpoint.
void write_checkpoint(const plan::Plan& plan, const std::map<std::string, Tensor>& state,
                      const TrainingProgress& progress, const std::string& path);

struct Checkpoint {
  std::map<std::string, Tensor> initializers;  // main graph and training algorithm
  TrainingProgress progress;
};

Checkpoint read_checkpoint(const std::string& path);

}  // namespace ampc::rt::io
