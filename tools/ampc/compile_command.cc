// `ampc compile MODEL.onnx -o MODEL.plan`: run the pipeline and write the plan file; with
// --train --emit-onnx FILE also the compiled training step in ONNX's training format.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/file_util.h"
#include "driver/pipeline.h"
#include "frontend/onnx/export.h"
#include "frontend/onnx/export_training.h"
#include "runtime/plan/plan_file.h"
#include "runtime/plan/plan_stats.h"
#include "tools/ampc/commands.h"
#include "tools/ampc/data_parallel.h"
#include "tools/ampc/training_options.h"
#ifdef AMPC_HAVE_CUDA
#include "runtime/cuda/op_builders.h"
#endif

namespace ampc::cli {
namespace {

struct CompileArgs {
  std::string model;
  std::string output;
  std::string emit_onnx;
  std::vector<std::string> input_shapes;
  compiler::CompileOptions options;
  TrainingOptions training;
  DataParallelArgs dp;  // --data-parallel, --reduce-dtype, --bucket-kib (data_parallel.h)
  bool time_passes = false;
  std::string print_to;  // --print-to FILE: where --print-after writes (default stderr)
};

// --list-passes: the pipeline's passes in order, then exit (no model needed).
void list_passes() {
  for (const auto& name : compiler::pipeline_pass_names()) std::cout << name << '\n';
  std::cout.flush();
  throw CLI::Success();
}

// A plan compiled for a CUDA target that the CUDA backend would refuse at load (an op without
// a CUDA kernel, a step its builder refuses): said now, in one line, rather than on the GPU
// machine. The plan is written all the same; the CPU backend runs it.
void warn_if_cuda_refuses(const plan::Plan& p) {
#ifdef AMPC_HAVE_CUDA
  if (p.target().rfind("cuda", 0) != 0) return;
  const std::vector<std::string> refusals = rt::cuda::cuda_load_refusals(p);
  if (refusals.empty()) return;
  // Steps of an op without a CUDA kernel ("Op (node 'n')") grouped by op, their count and
  // first node; other refusals as they are, the first five.
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const std::string& r : refusals) {
    const size_t at = r.find(" (node '");
    const std::string op = at == std::string::npos ? r : r.substr(0, at);
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == op; });
    if (it == groups.end()) it = groups.insert(groups.end(), {op, {}});
    it->second.push_back(r);
  }
  std::string list;
  for (size_t i = 0; i < groups.size() && i < 5; ++i) {
    const auto& [op, members] = groups[i];
    list += (i ? "; " : "") + members[0];
    if (members.size() > 1) list += " and " + std::to_string(members.size() - 1) + " more " + op;
  }
  if (groups.size() > 5) list += "; and " + std::to_string(groups.size() - 5) + " more";
  std::cerr << "ampc: warning: the CUDA backend cannot run " << refusals.size()
            << " step(s) of this plan: " << list << "; it runs with --device cpu\n";
#else
  (void)p;
#endif
}

void run_compile(const CompileArgs& args) {
  compiler::CompileOptions options = args.options;
  // A forward plan has no training step: options that only shape one are refused rather
  // than silently dropped (a training option does not imply --train: writing a training
  // plan is a choice the command line should show).
  if (!options.train) {
    std::string names;
    for (const auto& n : training_step_options_given(args.training))
      names += (names.empty() ? "" : ", ") + n;
    if (!names.empty()) {
      throw Error(names +
                  ": training options, but no --train; add --train to compile the "
                  "training step, or leave them out for a forward plan");
    }
  }
  for (const auto& spec : args.input_shapes) onnx_io::parse_input_shape(spec, options.import);
  finish_training_options(options, args.training);
  if (args.dp.data_parallel && !options.train) throw Error("--data-parallel needs --train");
  // `ampc train` takes them without mpirun too (one script for any -np; one rank has nothing
  // to reduce), but `ampc compile` is told data parallel or not: there they would be ignored.
  if (!args.dp.data_parallel && !args.dp.compile_options_given.empty()) {
    std::string names;
    for (const auto& n : args.dp.compile_options_given) names += (names.empty() ? "" : ", ") + n;
    throw Error(names + ": data-parallel options, but no --data-parallel");
  }
  set_data_parallel_options(args.dp, 1, options);
  compiler::StageTimes times;
  if (args.time_passes) options.stage_times = &times;
  // Exported by the pipeline before lowering, written after the plan; nothing is written
  // when compiling fails.
  std::string onnx_bytes;
  if (!args.emit_onnx.empty()) options.training_onnx = &onnx_bytes;
  std::ofstream print_file;
  if (!args.print_to.empty()) {
    if (options.passes.print_after.empty()) throw Error("--print-to needs --print-after");
    print_file.open(args.print_to, std::ios::trunc);
    if (!print_file) throw Error("cannot write '" + args.print_to + "'");
    options.passes.print_to = &print_file;
  }
  compiler::StageTimer import(options.stage_times, "import");
  auto model = compiler::load_for_compile(args.model, options);
  import.finish(static_cast<int64_t>(model->graph->nodes.size()));
  const plan::Plan p =
      compiler::compile_model(*model, options, std::filesystem::path(args.model).stem().string());
  compiler::StageTimer write(options.stage_times, "write plan");
  plan::save_plan(p, args.output);
  write.finish(p.steps_size());
  std::cout << "wrote " << args.output << ": " << p.steps_size() << " steps, "
            << plan::count_kernels(p) << " kernels (" << p.kernels_size()
            << " distinct generated), " << p.buffers_size() << " buffers, target " << p.target()
            << "\n";
  warn_if_cuda_refuses(p);
  if (args.time_passes) std::cout << compiler::format_stage_times(times);
  if (!args.emit_onnx.empty()) {
    write_file_atomically(args.emit_onnx, onnx_bytes);
    std::cout << "wrote " << args.emit_onnx << ": the training step in ONNX training format\n";
  }
}

}  // namespace

void add_compile_command(CLI::App& app) {
  auto args = std::make_shared<CompileArgs>();
  auto* cmd = app.add_subcommand("compile", "Compile an ONNX model into an execution plan");
  cmd->add_option("model", args->model, "ONNX model (.onnx)")->required();
  cmd->add_option("-o,--output", args->output, "Plan file to write")->required();
  add_input_shape_option(cmd, args->input_shapes);
  auto* train = cmd->add_flag(
      "--train", args->options.train,
      "Compile the training step: backward graph and optimizer (see the options below)");
  cmd->add_option("--emit-onnx", args->emit_onnx,
                  "Also write the compiled training step as an ONNX model in training format "
                  "(TrainingInfoProto); needs --train")
      ->needs(train);
  cmd->add_option("--target", args->options.lowering.target,
                  "cuda:sm_90 | cuda:sm_80 | cpu: the PTX the plan carries (default cuda:sm_90); "
                  "every plan also runs on the CPU backend")
      ->check(CLI::IsMember({"cuda:sm_90", "cuda:sm_80", "cpu"}));
  cmd->add_flag("--time-passes", args->time_passes,
                "Print the time and node count of every pass and pipeline stage");
  cmd->add_option("--print-after", args->options.passes.print_after,
                  "Print the IR after this pass (repeatable; `all`: after every pass) to stderr "
                  "or --print-to; --list-passes names them");
  cmd->add_option("--print-to", args->print_to, "Write what --print-after prints to this file");
  cmd->add_flag("--verify-each", args->options.passes.verify_each,
                "Verify the IR after every pass (always on in debug builds); a failure names "
                "the pass");
  // Runs while the command line is parsed, before the model is required.
  cmd->add_flag_callback("--list-passes", list_passes,
                         "Print the names of the passes over the IR in pipeline order and exit");
  cmd->add_flag(
      "--no-fusion", [args](int64_t) { args->options.lowering.fuse = false; },
      "One step per graph node: no fused kernels (for comparison and debugging)");
  add_training_options(cmd, args->options, args->training);
  add_data_parallel_options(cmd, args->dp, /*train=*/false);
  cmd->callback([args] { run_compile(*args); });
}

}  // namespace ampc::cli
