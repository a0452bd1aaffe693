// `ampc inspect MODEL.onnx`: what is in a model; with --precision, the model as autocast
// rewrites it, and with --precision-report what autocast decided per node. On a plan, or on
// an ONNX model without --precision (e.g. one `ampc compile --emit-onnx` wrote),
// --precision-report reports what the compiler produced (report/plan_precision.h).
// `ampc inspect PLAN`: its kernels and memory plan (report/plan_summary.h);
// `--kernel NAME [--show ptx|llvm|asm]` one fused kernel.
#include <filesystem>
#include <iostream>

#include "base/error.h"
#include "base/file_util.h"
#include "driver/pipeline.h"
#include "driver/training_signature.h"
#include "frontend/onnx/import.h"
#include "kernels/codegen/codegen.h"
#include "lower/plan_emit.h"
#include "passes/constant_folding.h"
#include "report/dot.h"
#include "report/plan_precision.h"
#include "report/plan_summary.h"
#include "report/precision_report.h"
#include "report/summary.h"
#include "runtime/plan/plan_file.h"
#include "tools/ampc/commands.h"
#include "tools/ampc/inspect_memory.h"
#include "tools/ampc/inspect_view.h"

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
  std::string kernel;  // a plan's fused kernel to show
  std::string show;    // "ptx", "llvm", "asm"; empty: its definition
  MemoryArgs memory;   // --memory, --device-memory and the training step's options
  // The whole step's pictures (--html, --train, ...) and the compile options, which hold
  // --precision, --allow, ... and --optimizer until the callback copies them here.
  StepViewArgs view;
};

// The options add_training_options stored in args.view, where the forward views read them.
void take_compile_options(InspectArgs& args, const CLI::App& cmd) {
  const auto& ac = args.view.compile.autocast;
  args.precision = args.view.training.precision;
  args.autocast.allow = ac.allow;
  args.autocast.deny = ac.deny;
  args.autocast.follow = ac.follow;
  args.autocast.keep_fp32 = ac.keep_fp32;
  args.autocast.policy_file = ac.policy_file;
  // --memory compiles the training step: every option of it as given, Adam by default.
  if (args.memory.memory) {
    args.memory.compile = args.view.compile;
    finish_training_options(args.memory.compile, args.view.training);
    if (!cmd.count("--optimizer")) args.memory.compile.optimizer.kind = "adam";
  }
  args.view.dot_file = args.dot_file;
  args.view.svg_file = args.svg_file;
  args.view.input_shapes = args.input_shapes;
}

void print_precision_report(const report::PrecisionReport& r, const InspectArgs& args) {
  if (args.format == "json") {
    std::cout << report::precision_report_json(r).dump(2) << '\n';
  } else {
    std::cout << report::precision_report_text(r, args.model);
  }
}

bool autocast_options_given(const InspectArgs& args) {
  const auto& a = args.autocast;
  return !a.allow.empty() || !a.deny.empty() || !a.follow.empty() || !a.keep_fp32.empty() ||
         !a.policy_file.empty();
}

// One fused kernel of a plan: its definition, its PTX or its LLVM IR.
void inspect_kernel(const plan::Plan& p, const InspectArgs& args) {
  if (args.format == "json") throw Error("--kernel prints text only (no --format json)");
  const kernels::KernelDef& def = report::find_kernel(p, args.kernel);
  if (args.show == "ptx") {
    std::cout << report::kernel_ptx(p, def);
  } else if (args.show == "llvm") {
    std::cout << kernels::codegen::llvm_ir_text(def, report::target_sm(p));
  } else if (args.show == "asm") {
    // What the CPU backend runs: the host JIT compiles every plan's kernels at load.
    std::cout << kernels::codegen::host_assembly(def);
  } else {
    std::cout << report::kernel_def_text(p, def);
  }
}

// A plan: its precision was decided when it was compiled, so only the report applies; else
// its kernels and memory plan, or one kernel.
void inspect_plan(const InspectArgs& args) {
  if (args.precision != "fp32" || autocast_options_given(args) || !args.input_shapes.empty() ||
      !args.dot_file.empty() || !args.svg_file.empty())
    throw Error(
        "--precision, --allow, --deny, --follow, --keep-fp32, --policy, --input-shape, --dot "
        "and --svg apply to ONNX models; a plan's were fixed when it was compiled");
  if (args.precision_report && !args.kernel.empty())
    throw Error("--kernel and --precision-report are separate views: give one");
  if (!args.show.empty() && args.kernel.empty()) throw Error("--show needs --kernel NAME");
  const plan::Plan p = plan::load_plan(args.model);
  if (args.precision_report) {
    print_precision_report(report::precision_report_of_plan(p), args);
  } else if (!args.kernel.empty()) {
    inspect_kernel(p, args);
  } else if (args.format == "json") {
    std::cout << report::plan_summary_json(p).dump(2) << '\n';
  } else {
    std::cout << report::plan_summary_text(p, args.model);
  }
}

void run_inspect(const InspectArgs& args) {
  if (args.memory.memory)
    return inspect_memory(args.model, args.memory, args.precision, args.input_shapes, args.format);
  if (!args.memory.device_memory.empty()) throw Error("--device-memory needs --memory");
  if (plan::looks_like_plan(args.model) || std::filesystem::path(args.model).extension() == ".plan")
    return inspect_plan(args);
  if (!args.kernel.empty() || !args.show.empty())
    throw Error("--kernel and --show apply to plans; '" + args.model + "' is an ONNX model");
  onnx_io::ImportOptions options;
  for (const auto& spec : args.input_shapes) onnx_io::parse_input_shape(spec, options);
  passes::AutocastOptions autocast = args.autocast;
  autocast.precision = passes::parse_precision(args.precision);
  const bool autocast_report =
      args.precision_report && autocast.precision != passes::Precision::kFP32;
  if (args.precision_report && !autocast_report && autocast_options_given(args))
    throw Error(
        "--allow, --deny, --follow, --keep-fp32 and --policy need --precision fp16 or bf16");
  // Without --precision the report is of the model as it is, with its training step when it
  // has one (a model ampc exported in ONNX's training format).
  options.training = args.precision_report && !autocast_report;
  const auto model = onnx_io::load_model(args.model, options);
  passes::AutocastReport precision;
  if (autocast.precision != passes::Precision::kFP32) {
    precision = compiler::autocast_prepared(*model, autocast);
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
  if (autocast_report) {
    print_precision_report(report::from_autocast(precision), args);
  } else if (args.precision_report) {
    passes::fold_constants(*model);
    // Lowered as `ampc compile` would, so that steps read the buffers they would in a plan.
    compiler::mark_imported_phases(*model);
    lower::EmitOptions emit;
    if (!model->state_updates.empty()) emit.training = compiler::training_signature(*model, {}, 1);
    const plan::Plan lowered = lower::emit_plan(*model, emit);
    print_precision_report(report::plan_precision_report(lowered, report::PlanOrigin::kModel),
                           args);
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
  cmd->add_option("model", args->model,
                  "ONNX model (.onnx), or a plan: its kernels and memory plan")
      ->required();
  cmd->add_option("--format", args->format, "Output format")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->add_option(
      "--dot", args->dot_file,
      "Write the graph as Graphviz DOT, nodes coloured by element type; the whole step for a "
      "training model, a plan or --train (docs/viewer.md)");
  cmd->add_option("--svg", args->svg_file, "Render the graph to SVG through Graphviz");
  add_input_shape_option(cmd, args->input_shapes);
  cmd->add_flag("--precision-report", args->precision_report,
                "Every node's (a plan's: step's) compute dtype and deciding rule, the Casts and "
                "the bytes they move per step, and the loss-scaling subgraph");
  cmd->add_option("--kernel", args->kernel,
                  "A plan's fused kernel to show: its definition, or with --show its code");
  cmd->add_option("--show", args->show,
                  "With --kernel: the PTX stored for the plan's target, its LLVM IR, or the "
                  "host machine code the CPU backend runs (asm, compiled for this CPU)")
      ->check(CLI::IsMember({"ptx", "llvm", "asm"}));
  cmd->add_flag("--memory", args->memory.memory,
                "Training memory by category, fp32 and 16-bit (--precision bf16: bf16) side "
                "by side");
  cmd->add_option("--device-memory", args->memory.device_memory,
                  "With --memory: the largest batch that fits this size (80GiB, 141GB; "
                  "repeatable), found by planning");
  // --precision (the model as autocast rewrites it), --allow ..., and --optimizer (with
  // --memory: default adam) as `ampc compile` takes them; the step view (--train) all of them.
  add_training_options(cmd, args->view.compile, args->view.training);
  add_step_view_options(cmd, args->view);
  cmd->callback([args, cmd] {
    take_compile_options(*args, *cmd);
    if (!args->memory.memory && step_view_requested(args->view, args->model))
      return inspect_step_view(args->model, args->view);
    run_inspect(*args);
  });
}

}  // namespace ampc::cli
