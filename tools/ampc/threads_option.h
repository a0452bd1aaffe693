// `--threads N`, accepted by every command (before or after its name): the number of threads
// of the one OpenMP pool that runs the CPU backend's operators, its generated kernels and
// oneDNN's GEMMs and convolutions (libdnnl runs on OpenMP; OpenBLAS, where it still serves,
// runs single-threaded inside that pool). Default: OMP_NUM_THREADS, else the cores available.
#pragma once

#include <CLI/CLI.hpp>

namespace ampc::cli {

// Call before the commands are added: they inherit the fall-through to the main app.
void add_threads_option(CLI::App& app);

}  // namespace ampc::cli
