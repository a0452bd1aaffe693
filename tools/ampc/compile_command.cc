// `ampc compile MODEL.onnx -o MODEL.plan`: run the pipeline and write the plan file.
#include <iostream>

#include "base/error.h"
#include "compiler/pipeline.h"
#include "runtime/plan/plan_file.h"
#include "tools/ampc/commands.h"

namespace ampc::cli {
namespace {

struct CompileArgs {
  std::string model;
  std::string output;
  std::vector<std::string> input_shapes;
};

void run_compile(const CompileArgs& args) {
  compiler::CompileOptions options;
  for (const auto& spec : args.input_shapes) onnx_io::parse_input_shape(spec, options.import);
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
  cmd->callback([args] { run_compile(*args); });
}

}  // namespace ampc::cli
