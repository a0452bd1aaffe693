// `ampc train MODEL.onnx|MODEL.plan --data DATA --steps N`: the training loop's options;
// the run itself is trainer.h.
#include <memory>

#include "tools/ampc/commands.h"
#include "tools/ampc/data_parallel.h"
#include "tools/ampc/grad_stats_options.h"
#include "tools/ampc/train_args.h"
#include "tools/ampc/trainer.h"
#include "tools/ampc/training_options.h"

namespace ampc::cli {

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  auto& o = args->compile;
  auto* cmd = app.add_subcommand(
      "train", "Train a model (ONNX, compiled for training on the fly, or a training plan)");
  cmd->add_option("model", args->model,
                  "ONNX model whose output is the loss, or a plan from `ampc compile --train`")
      ->required();
  cmd->add_option("--data", args->data,
                  ".npz file or folder of .npy files, one array per graph input")
      ->required();
  cmd->add_option("--steps", args->steps,
                  "Optimizer steps to run (after --resume: more steps); with --accum-steps N, N "
                  "batches each");
  cmd->add_flag("--shuffle", args->shuffle, "Shuffle every epoch (reproducibly, see --seed)");
  cmd->add_option("--seed", args->seed, "Seed of the shuffle and of dropout masks");
  cmd->add_option("--log", args->log_file, "Write one JSON object per step to this .jsonl file");
  cmd->add_option("--log-every", args->log_every,
                  "Progress line every K steps (when stderr is not a terminal)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--eval", args->eval_data,
                  "Held-out data (.npz or .npy folder): loss and accuracy after training");
  cmd->add_option("--holdout", args->holdout,
                  "Hold out this share of --data (its last samples) for evaluation, e.g. 0.2")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--checkpoint", args->checkpoint,
                  "Write an ONNX checkpoint (trained model + optimizer state) here at the end");
  cmd->add_option("--checkpoint-every", args->checkpoint_every, "... and every K steps")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--resume", args->resume,
                  "Continue from a checkpoint of the same plan (state and data position)");
  add_input_shape_option(cmd, args->input_shapes);
  cmd->add_flag("--find-nonfinite", args->find_nonfinite,
                "Run every skipped step again with a check after each plan step and name the "
                "ONNX node that first produced a NaN or infinity");
  cmd->add_option("--max-consecutive-skips", args->max_consecutive_skips,
                  "Stop with an explanation after K steps in a row skipped for non-finite "
                  "gradients (default 50; 0: never)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", args->device,
                  "Where to train: cpu (default), cuda or cuda:N (the GPU of that index)");
  add_training_options(cmd, o, args->training);
  add_grad_stats_options(cmd, args->grad_stats);
  add_data_parallel_options(cmd, args->dp, /*train=*/true);
  cmd->callback([args] {
    with_data_parallel_run(args->dp, [&](DataParallelRun& dp) { run_train(*args, dp); });
  });
}

}  // namespace ampc::cli
