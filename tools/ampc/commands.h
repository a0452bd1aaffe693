// Each subcommand of `ampc` lives in its own file and registers itself here.
#pragma once

#include <CLI/CLI.hpp>

namespace ampc::cli {

void add_inspect_command(CLI::App& app);
void add_compile_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_report_command(CLI::App& app);

}  // namespace ampc::cli
