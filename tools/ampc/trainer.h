// `ampc train`'s run: the training plan on its device, the data and a resumed checkpoint
// (setup), the optimizer steps (each its micro-batches, the log line, the skipped-steps
// guard, checkpoints, interruption), then the summary and the held-out evaluation.
#pragma once

#include "tools/ampc/data_parallel.h"
#include "tools/ampc/train_args.h"

namespace ampc::cli {

// Trains as `args` say, on this rank of `dp`; prints the summary on rank 0.
void run_train(TrainArgs& args, DataParallelRun& dp);

}  // namespace ampc::cli
