// `ampc compile MODEL.onnx -o MODEL.plan`: run the pipeline and write the plan file.
#include <iostream>

#include "base/error.h"
#include "compiler/pipeline.h"
#include "runtime/plan/plan_file.h"
#include "tools/ampc/commands.h"
#include "tools/ampc/training_options.h"

namespace ampc::cli {
namespace {

struct CompileArgs {
  std::string model;
  std::string output;
  std::vector<std::string> input_shapes;
  compiler::CompileOptions options;
  TrainingOptions training;
};

void run_compile(const CompileArgs& args) {
  compiler::CompileOptions options = args.options;
  for (const auto& spec : args.input_shapes) onnx_io::parse_input_shape(spec, options.import);
  finish_training_options(options, args.training);
  const plan::Plan p = compiler::compile_file(args.model, options);
  plan::save_plan(p, args.output);
  std::cout << "wrote " << args.output << ": " << p.steps_size() << " steps, " << p.buffers_size()
            << " buffers\n";
}

}  // namespace

void add_compile_command(CLI::App& app) {
  auto args = std::make_shared<CompileArgs>();
  auto* cmd = app.add_subcommand("compile", "Compile an ONNX model into an execution plan");
  cmd->add_option("model", args->model, "ONNX model (.onnx)")->required();
  cmd->add_option("-o,--output", args->output, "Plan file to write")->required();
  cmd->add_option("--input-shape", args->input_shapes,
                  "Fix an input's shape: NAME=D0xD1x... (repeatable)");
  cmd->add_flag("--train", args->options.train,
                "Compile the training step: backward graph and optimizer (see the options below)");
  add_training_options(cmd, args->options, args->training);
  cmd->callback([args] { run_compile(*args); });
}

}  // namespace ampc::cli
