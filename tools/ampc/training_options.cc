#include "tools/ampc/training_options.h"

#include <cstdio>

#include "base/error.h"

namespace ampc::cli {
namespace {

// Every option add_training_options defines: they describe the training step ampc builds,
// so none may be given for a model that brings its own (ONNX training format).
const char* const kTrainingOptionNames[] = {"--loss",         "--freeze",   "--optimizer",
                                            "--lr",           "--momentum", "--nesterov",
                                            "--weight-decay", "--betas",    "--eps"};

}  // namespace

void add_training_options(CLI::App* cmd, compiler::CompileOptions& o, TrainingOptions& extra) {
  extra.command = cmd;
  cmd->add_option("--loss", o.autodiff.loss,
                  "The graph output to minimise (default: the only output)");
  cmd->add_option("--freeze", o.autodiff.freeze,
                  "Parameters not to train (glob pattern, repeatable)");
  cmd->add_option("--optimizer", o.optimizer.kind, "sgd | adam | adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  cmd->add_option("--lr", o.optimizer.lr, "Learning rate");
  cmd->add_option("--momentum", o.optimizer.momentum, "SGD momentum");
  cmd->add_flag("--nesterov", o.optimizer.nesterov, "SGD Nesterov momentum");
  cmd->add_option("--weight-decay", o.optimizer.weight_decay, "Weight decay");
  cmd->add_option("--betas", extra.betas, "Adam betas B1,B2");
  cmd->add_option("--eps", o.optimizer.eps, "Adam epsilon");
}

void finish_training_options(compiler::CompileOptions& o, const TrainingOptions& extra) {
  if (extra.command) {
    for (const char* name : kTrainingOptionNames)
      o.optimizer_options_given |= extra.command->count(name) > 0;
  }
  if (extra.betas.empty()) return;
  if (std::sscanf(extra.betas.c_str(), "%lf,%lf", &o.optimizer.beta1, &o.optimizer.beta2) != 2) {
    throw Error("--betas '" + extra.betas + "': expected B1,B2 (for example 0.9,0.999)");
  }
}

}  // namespace ampc::cli
