#include "tools/ampc/inspect_view.h"

#include <filesystem>
#include <iostream>
#include <memory>

#include "base/dtype.h"
#include "base/error.h"
#include "base/file_util.h"
#include "driver/pipeline.h"
#include "frontend/onnx/import.h"
#include "frontend/onnx/read_model.h"
#include "report/dot.h"
#include "report/step_view.h"
#include "report/step_view_dot.h"
#include "report/step_view_filter.h"
#include "report/step_view_html.h"
#include "runtime/plan/plan_file.h"

namespace ampc::cli {
namespace {

bool is_plan(const std::string& path) {
  return plan::looks_like_plan(path) || std::filesystem::path(path).extension() == ".plan";
}

bool is_training_format(const std::string& path) {
  return onnx_io::read_model_proto(path).training_info_size() > 0;
}

// A plan's embedded training step as a graph; null for a forward plan, or when it does not
// import. Its STATE initializers carry no data (plan.proto): zeros stand in, as the drawing
// needs only the graph.
std::unique_ptr<ir::Model> plan_graph(const plan::Plan& p) {
  if (p.training_model().empty()) return nullptr;
  onnx::ModelProto proto;
  if (!proto.ParseFromString(p.training_model())) return nullptr;
  auto fill = [](onnx::GraphProto& g) {
    for (auto& init : *g.mutable_initializer()) {
      if (!init.raw_data().empty() || !dtype_is_known(init.data_type())) continue;
      int64_t numel = 1;
      for (int64_t d : init.dims()) numel *= d;
      const size_t bytes = numel * dtype_size(static_cast<DType>(init.data_type()));
      const bool typed_data = init.float_data_size() || init.int32_data_size() ||
                              init.int64_data_size() || init.double_data_size();
      if (!typed_data) init.set_raw_data(std::string(bytes, '\0'));
    }
  };
  fill(*proto.mutable_graph());
  for (auto& t : *proto.mutable_training_info()) {
    fill(*t.mutable_algorithm());
    fill(*t.mutable_initialization());
  }
  try {
    onnx_io::ImportOptions options;
    options.training = true;
    return onnx_io::import_model(proto, options);
  } catch (const Error&) {
    return nullptr;  // drawn from its steps alone
  }
}

struct Compiled {
  plan::Plan plan;
  std::unique_ptr<ir::Model> graph;
  std::string origin;
};

Compiled compile_for_view(const std::string& path, compiler::CompileOptions options) {
  Compiled c;
  c.origin = options.train ? "model compiled for training" : "model compiled";
  if (is_training_format(path)) {
    options.train = true;  // its own training step, used as it is
    c.origin = "training model";
  }
  c.graph = compiler::load_for_compile(path, options);
  c.plan = compiler::compile_model(*c.graph, options, std::filesystem::path(path).stem());
  return c;
}

void write_outputs(const report::StepView& view, const StepViewArgs& args) {
  std::vector<std::string> written;
  try {
    if (!args.dot_file.empty() || !args.svg_file.empty()) {
      report::StepDotOptions dot_options;
      dot_options.collapse_depth = std::max(args.collapse, 0);
      const std::string dot = report::step_view_dot(view, dot_options);
      if (!args.svg_file.empty()) {
        report::write_svg(dot, args.svg_file);
        written.push_back(args.svg_file);
      }
      if (!args.dot_file.empty()) {
        write_file_atomically(args.dot_file, dot);
        written.push_back(args.dot_file);
      }
    }
    if (!args.html_file.empty()) {
      report::StepHtmlOptions html_options;
      html_options.collapse_depth = args.collapse < 0 ? 1 : args.collapse;
      write_file_atomically(args.html_file, report::step_view_html(view, html_options));
      written.push_back(args.html_file);
    }
  } catch (const Error&) {
    for (const auto& f : written) std::filesystem::remove(f);  // all or nothing
    throw;
  }
  for (const auto& f : written)
    std::cout << "wrote " << f << ": " << view.nodes.size() << " nodes\n";
}

}  // namespace

void add_step_view_options(CLI::App* cmd, StepViewArgs& args) {
  cmd->add_option("--html", args.html_file,
                  "Write the whole step as one self-contained interactive page (pan, zoom, "
                  "scopes, search, node details, overlays)");
  cmd->add_flag("--train", args.train,
                "Draw the training step the compile options build (backward, loss scaling, "
                "optimizer, skip-step), as `ampc compile --train` would");
  cmd->add_option("--collapse", args.collapse,
                  "Draw every name scope at this depth as one box (1: /blocks.0); 0 draws "
                  "every node (the page opens at 1)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--focus", args.focus, "Draw only one part of the step")
      ->check(CLI::IsMember({"amp", "forward", "backward", "optimizer"}));
  cmd->add_option("--around", args.around,
                  "Draw only the nodes near this node (or tensor), see --depth");
  cmd->add_option("--depth", args.depth, "With --around: how many edges away (default 2)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--diff-autocast", args.diff_autocast,
                "Draw only what autocast changed: nodes in another dtype than in fp32, and the "
                "inserted casts (needs --precision fp16|bf16)");
  cmd->add_option("--grad-stats", args.grad_stats,
                  "An `ampc train --grad-stats` log: gradient ranges on the page");
}

bool step_view_requested(const StepViewArgs& args, const std::string& model_path) {
  if (!args.html_file.empty() || args.train || args.collapse >= 0 || !args.focus.empty() ||
      !args.around.empty() || args.diff_autocast || !args.grad_stats.empty() ||
      !training_step_options_given(args.training).empty())
    return true;
  if (args.dot_file.empty() && args.svg_file.empty()) return false;
  return is_plan(model_path) || is_training_format(model_path);
}

void inspect_step_view(const std::string& model_path, StepViewArgs& args) {
  if (args.dot_file.empty() && args.svg_file.empty() && args.html_file.empty())
    throw Error(
        "--train, --collapse, --focus, --around, --diff-autocast and --grad-stats shape a "
        "picture: give --dot, --svg or --html");
  compiler::CompileOptions options = args.compile;
  finish_training_options(options, args.training);
  options.train = args.train;
  for (const auto& spec : args.input_shapes) onnx_io::parse_input_shape(spec, options.import);
  const std::string title = std::filesystem::path(model_path).filename().string();

  report::StepView view;
  if (is_plan(model_path)) {
    if (args.train || args.diff_autocast || !compile_options_given(args.training).empty() ||
        !args.input_shapes.empty())
      throw Error(
          "--train, --diff-autocast, --input-shape and the compile options apply to ONNX "
          "models; a plan's were fixed when it was compiled");
    const plan::Plan p = plan::load_plan(model_path);
    const auto graph = plan_graph(p);
    view = report::build_step_view(p, graph.get(), title, "plan");
  } else {
    std::string names;
    for (const auto& n : training_step_options_given(args.training))
      names += (names.empty() ? "" : ", ") + n;
    if (!names.empty() && !args.train && !is_training_format(model_path))
      throw Error(names +
                  ": training options, but no --train; add --train to draw the training "
                  "step, or leave them out for the forward graph");
    const Compiled c = compile_for_view(model_path, options);
    view = report::build_step_view(c.plan, c.graph.get(), title, c.origin);
    if (args.diff_autocast) {
      if (options.autocast.precision == passes::Precision::kFP32)
        throw Error("--diff-autocast needs --precision fp16 or bf16");
      compiler::CompileOptions fp32 = options;
      fp32.autocast = {};
      fp32.half_inputs = false;
      const Compiled before = compile_for_view(model_path, fp32);
      view = report::autocast_diff_view(
          report::build_step_view(before.plan, before.graph.get(), title, before.origin), view);
    }
  }
  if (!args.grad_stats.empty()) report::attach_grad_stats(view, args.grad_stats);
  if (!args.focus.empty()) view = report::focus_view(view, args.focus);
  if (!args.around.empty()) view = report::around_view(view, args.around, args.depth);
  write_outputs(view, args);
}

}  // namespace ampc::cli
