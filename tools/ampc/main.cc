// `ampc`: the command line. Errors the user can act on print one line and exit 1; usage
// errors print CLI11's message and exit 2.
#include <iostream>

#include "base/error.h"
#include "tools/ampc/commands.h"
#include "tools/ampc/omp_wait_policy.h"
#include "tools/ampc/threads_option.h"

int main(int argc, char** argv) {
  ampc::cli::ensure_passive_omp_wait(argc, argv);
  CLI::App app{"ampc: ahead-of-time mixed-precision compiler and trainer for ONNX models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ampc 0.1.0"));
  ampc::cli::add_threads_option(app);
  ampc::cli::add_compile_command(app);
  ampc::cli::add_run_command(app);
  ampc::cli::add_train_command(app);
  ampc::cli::add_inspect_command(app);
  ampc::cli::add_bench_command(app);
  ampc::cli::add_report_command(app);
  ampc::cli::add_ops_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const ampc::Error& e) {
    std::cerr << "ampc: error: " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ampc: internal error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
