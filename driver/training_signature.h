// The training signature of a plan (plan.proto TrainingSignature): what the trainer reads and
// where. The compiler makes the values graph outputs before lowering, so that fusion keeps
// them and the memory plan plans them as outputs: nothing edits the plan after it is made.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::compiler {

// The loss scaler's and the lr schedule's values the trainer logs (passes/loss_scaling.h,
// passes/lr_schedule.h), made outputs of the graph where the step computes them: the scale
// the step used, found_inf, the gradients' norm, the scheduled lr. Call after the training
// step is exported (the embedded ONNX step keeps only the model's own outputs).
void add_trainer_outputs(ir::Model& model);

// The signature of a training graph: `losses` as chosen (empty: the first output), the
// outputs add_trainer_outputs made, the lr and scale buffers, the micro-batches per optimizer
// step, its counter, and the loss scaler's state.
plan::TrainingSignature training_signature(const ir::Model& model,
                                           const std::vector<std::string>& losses,
                                           int64_t micro_batches);

}  // namespace ampc::compiler
