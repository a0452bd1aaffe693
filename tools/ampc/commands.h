// Each subcommand of `ampc` lives in its own file and registers itself here.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace ampc::cli {

void add_inspect_command(CLI::App& app);
void add_compile_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_ops_command(CLI::App& app);

// `--input-shape NAME=D0xD1x...` (repeatable), for the commands that import an ONNX model;
// the specs go to onnx_io::parse_input_shape.
inline void add_input_shape_option(CLI::App* cmd, std::vector<std::string>& specs) {
  cmd->add_option("--input-shape", specs, "Fix an input's shape: NAME=D0xD1x... (repeatable)");
}

}  // namespace ampc::cli
