// `ampc inspect MODEL.onnx`: what is in a model; with --precision, the model as autocast
// rewrites it, and with --precision-report what autocast decided per node.
#include <filesystem>
#include <iostream>

#include "base/error.h"
#include "base/file_util.h"
#include "compiler/onnx/import.h"
#include "compiler/pipeline.h"
#include "compiler/report/dot.h"
#include "compiler/report/precision_report.h"
#include "compiler/report/summary.h"
#include "passes/constant_folding.h"
#include "tools/ampc/commands.h"

namespace ampc::cli {
namespace {

struct InspectArgs {
  std::string model;
  std::string format = "text";
  std::string dot_file;
  std::string svg_file;
  std::vector<std::string> input_shapes;
  std::string precision = "fp32";
  bool precision_report = false;
  passes::AutocastOptions autocast;
};

void run_inspect(const InspectArgs& args) {
  onnx_io::ImportOptions options;
  for (const auto& spec : args.input_shapes) onnx_io::parse_input_shape(spec, options);
  const auto model = onnx_io::load_model(args.model, options);
  passes::AutocastOptions autocast = args.autocast;
  autocast.precision = passes::parse_precision(args.precision);
  if (args.precision_report && autocast.precision == passes::Precision::kFP32)
    throw Error("--precision-report needs --precision fp16 or bf16");
  passes::AutocastReport precision;
  if (autocast.precision != passes::Precision::kFP32) {
    // As `ampc compile` does before autocast: shape arithmetic folded first.
    passes::fold_constants(*model);
    precision = compiler::autocast_forward(*model, autocast);
  }
  if (!args.dot_file.empty() || !args.svg_file.empty()) {
    const std::string dot = report::to_dot(*model);
    // The SVG (which needs Graphviz, so fails more often) first; a failed command leaves
    // neither file behind.
    if (!args.svg_file.empty()) report::write_svg(dot, args.svg_file);
    if (!args.dot_file.empty()) {
      try {
        write_file_atomically(args.dot_file, dot);
      } catch (const Error&) {
        if (!args.svg_file.empty()) std::filesystem::remove(args.svg_file);
        throw;
      }
    }
  }
  if (args.precision_report) {
    if (args.format == "json") {
      std::cout << report::precision_report_json(precision).dump(2) << '\n';
    } else {
      std::cout << report::precision_report_text(precision, args.model);
    }
  } else if (args.format == "json") {
    std::cout << report::model_summary_json(*model).dump(2) << '\n';
  } else {
    std::cout << report::model_summary_text(*model, args.model);
  }
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  auto* cmd =
      app.add_subcommand("inspect", "Show a model's inputs, outputs, weights and operators");
  cmd->add_option("model", args->model, "ONNX model (.onnx)")->required();
  cmd->add_option("--format", args->format, "Output format")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--dot", args->dot_file,
                  "Write the graph as Graphviz DOT, nodes coloured by element type");
  cmd->add_option("--svg", args->svg_file, "Render the graph to SVG through Graphviz");
  cmd->add_option("--input-shape", args->input_shapes,
                  "Fix an input's shape: NAME=D0xD1x... (repeatable)");
  cmd->add_option("--precision", args->precision,
                  "Show the model as autocast rewrites it for fp16 or bf16 (default fp32)");
  cmd->add_flag("--precision-report", args->precision_report,
                "Every node's compute dtype and deciding rule, the inserted Casts and the "
                "bytes they move per step");
  cmd->add_option("--allow", args->autocast.allow, "Op type moved to ALLOW (repeatable)");
  cmd->add_option("--deny", args->autocast.deny, "Op type moved to DENY (repeatable)");
  cmd->add_option("--follow", args->autocast.follow, "Op type moved to FOLLOW (repeatable)");
  cmd->add_option("--keep-fp32", args->autocast.keep_fp32,
                  "Nodes pinned to fp32: node-name glob pattern (repeatable)");
  cmd->add_option("--policy", args->autocast.policy_file, "JSON file of precision overrides");
  cmd->callback([args] { run_inspect(*args); });
}

}  // namespace ampc::cli
