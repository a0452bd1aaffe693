// `ampc inspect ... --dot/--svg/--html` of a whole training step (or forward plan): from a
// source model with the compile options (--train --precision fp16 ...), from a model in ONNX's
// training format (`ampc compile --emit-onnx`), or from a plan; with the narrower views
// (--collapse, --focus, --around/--depth, --diff-autocast) and overlays (--grad-stats).
// See report/step_view.h and docs/viewer.md.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "tools/ampc/training_options.h"

namespace ampc::cli {

struct StepViewArgs {
  std::string dot_file, svg_file, html_file;
  bool train = false;
  int collapse = -1;  // -1: not given (the picture draws every node, the page opens at 1)
  std::string focus;
  std::string around;
  int depth = 2;
  bool diff_autocast = false;
  std::string grad_stats;
  std::vector<std::string> input_shapes;
  // The compile options (add_training_options); inspect's --precision, --allow, ... live here.
  compiler::CompileOptions compile;
  TrainingOptions training;
};

// --html, --train, --collapse, --focus, --around, --depth, --diff-autocast, --grad-stats.
void add_step_view_options(CLI::App* cmd, StepViewArgs& args);

// Whether the command asks for the step view rather than the forward graph's picture: any
// of its own options, a picture of a plan, or of a model in ONNX's training format.
bool step_view_requested(const StepViewArgs& args, const std::string& model_path);

void inspect_step_view(const std::string& model_path, StepViewArgs& args);

}  // namespace ampc::cli
