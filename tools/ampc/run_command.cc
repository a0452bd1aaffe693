// `ampc run MODEL.onnx|MODEL.plan --input NAME=FILE ... [--device cpu|cuda[:N]]`: one forward
// execution.
#include <filesystem>
#include <iomanip>
#include <iostream>

#include "base/error.h"
#include "base/number_format.h"
#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"
#include "runtime/io/npy.h"
#include "runtime/io/tensor_pb.h"
#include "runtime/plan/plan_file.h"
#include "tools/ampc/commands.h"
#include "tools/ampc/device_backend.h"

namespace ampc::cli {
namespace fs = std::filesystem;
namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir;
  std::string format;  // npy | pb; default: that of the first input
  std::vector<std::string> input_shapes;
  std::string device = "cpu";  // --device cpu|cuda[:N]
};

bool is_npy(const std::string& path) {
  return fs::path(path).extension() == ".npy";
}

rt::Tensor read_tensor(const std::string& path) {
  return is_npy(path) ? rt::io::read_npy(path) : rt::io::read_tensor_pb(path);
}

// Output names may hold characters that do not belong in file names.
std::string file_stem(const std::string& name) {
  std::string s = name;
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  return s;
}

void print_summary(const std::string& name, const rt::Tensor& t) {
  std::cout << name << ": " << t.type_str();
  if (t.dtype() == DType::kFloat32 && t.numel() > 0) {
    std::cout << " = [";
    for (int64_t i = 0; i < std::min<int64_t>(t.numel(), 8); ++i)
      std::cout << (i ? ", " : "") << format_number(t.data<float>()[i], "%g");
    std::cout << (t.numel() > 8 ? ", ...]" : "]");
  }
  std::cout << '\n';
}

void run_run(const RunArgs& args) {
  std::map<std::string, rt::Tensor> feeds;
  std::string first_format;
  for (const auto& spec : args.inputs) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("--input '" + spec + "': expected NAME=FILE (.npy or .pb)");
    const std::string file = spec.substr(eq + 1);
    feeds[spec.substr(0, eq)] = read_tensor(file);
    if (first_format.empty()) first_format = is_npy(file) ? "npy" : "pb";
  }
  const Device device = parse_device(args.device);
  const std::string target = compile_target(device);  // a missing GPU is reported first
  plan::Plan p;
  // By content, and by name so that a plan cut short before its magic still reads as one.
  if (plan::looks_like_plan(args.model) || fs::path(args.model).extension() == ".plan") {
    if (!args.input_shapes.empty())
      throw Error("--input-shape applies to ONNX models; a plan's shapes are fixed");
    p = plan::load_plan(args.model);
  } else {
    compiler::CompileOptions options;
    options.lowering.target = target;  // the device's: no PTX for the CPU
    for (const auto& spec : args.input_shapes) onnx_io::parse_input_shape(spec, options.import);
    // Unless told otherwise, an ONNX model is compiled for the shapes of the given inputs.
    for (const auto& [name, t] : feeds) options.import.input_shapes.emplace(name, t.shape());
    p = compiler::compile_file(args.model, options);
  }
  const std::unique_ptr<rt::Backend> backend = make_backend(std::move(p), device, 1, args.model);
  rt::Backend& executor = *backend;
  const auto outputs = executor.run(feeds);
  const std::string format =
      args.format.empty() ? (first_format.empty() ? "npy" : first_format) : args.format;
  if (!args.output_dir.empty()) fs::create_directories(args.output_dir);
  for (const auto& binding : executor.plan().outputs()) {
    const rt::Tensor& t = outputs.at(binding.name());
    print_summary(binding.name(), t);
    if (args.output_dir.empty()) continue;
    const std::string path =
        (fs::path(args.output_dir) / (file_stem(binding.name()) + "." + format)).string();
    if (format == "npy") {
      rt::io::write_npy(t, path);
    } else {
      rt::io::write_tensor_pb(t, binding.name(), path);
    }
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Run a model or plan once (on the CPU, or --device cuda)");
  cmd->add_option("model", args->model, "ONNX model (.onnx) or plan (.plan)")->required();
  cmd->add_option("--input", args->inputs,
                  "NAME=FILE with FILE a .npy or ONNX TensorProto .pb (repeatable)");
  cmd->add_option("--output-dir", args->output_dir, "Write each output to DIR/NAME.npy or .pb");
  cmd->add_option("--format", args->format, "Output file format (default: that of the first input)")
      ->check(CLI::IsMember({"npy", "pb"}));
  add_input_shape_option(cmd, args->input_shapes);
  cmd->add_option("--device", args->device, "Where to run: cpu (default), cuda or cuda:N");
  cmd->callback([args] { run_run(*args); });
}

}  // namespace ampc::cli
