// `ampc train`'s command line as parsed (train_command.cc), which the run reads (trainer.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "tools/ampc/data_parallel.h"
#include "tools/ampc/grad_stats_options.h"
#include "tools/ampc/training_options.h"

namespace ampc::cli {

struct TrainArgs {
  std::string model;
  std::string data;
  int64_t steps = 100;
  bool shuffle = false;
  uint64_t seed = 0;
  std::string log_file;
  int64_t log_every = 10;
  std::string eval_data;
  double holdout = 0;
  std::string checkpoint;
  int64_t checkpoint_every = 0;
  std::string resume;
  int64_t max_consecutive_skips = 50;
  bool find_nonfinite = false;
  std::vector<std::string> input_shapes;
  std::string device = "cpu";  // --device cpu|cuda[:N]
  std::string target = "cpu";  // what an ONNX model is compiled for (the device's)
  GradStatsArgs grad_stats;    // --grad-stats, --grad-stats-every, --activation-stats
  compiler::CompileOptions compile;
  TrainingOptions training;
  DataParallelArgs dp;  // --reduce-dtype, --bucket-kib, --comm-timeout (data_parallel.h)
  int world = 1;        // ranks of the run (mpirun -np N)
};

}  // namespace ampc::cli
