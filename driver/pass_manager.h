// A pass manager: runs a sequence of named passes over an ir::Model, optionally verifying the
// IR after each one (ir::verify), printing it (ir::to_text) after the passes asked for
// (`ampc compile --print-after`) and timing each (`--time-passes`).
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "driver/stage_timer.h"
#include "ir/graph.h"
#include "ir/verifier.h"

namespace ampc::compiler {

// Debug builds verify the IR after every pass unless told otherwise.
#ifdef NDEBUG
inline constexpr bool kVerifyEachPassByDefault = false;
#else
inline constexpr bool kVerifyEachPassByDefault = true;
#endif

struct Pass {
  Pass(std::string pass_name, std::function<void(ir::Model&)> pass_run,
       std::optional<ir::Phase> pass_phase = std::nullopt, std::function<bool()> when = {})
      : name(std::move(pass_name)),
        run(std::move(pass_run)),
        phase(pass_phase),
        enabled(std::move(when)) {}

  std::string name;
  std::function<void(ir::Model&)> run;
  // The part of the training step the pass builds: Graph::build_phase is set to it before the
  // pass runs, and left so (the next pass that names a phase changes it). A pass without one
  // adds nodes in whatever phase the passes before it left.
  std::optional<ir::Phase> phase;
  // When set and false at the pass's turn, the pass does not run (it is not timed, verified
  // or printed either). Evaluated then, so it may read what earlier passes decided.
  std::function<bool()> enabled;
};

struct PassOptions {
  // ir::verify after every pass; a failure is an Error naming the pass.
  bool verify_each = kVerifyEachPassByDefault;
  // Prints the IR after each run of these passes ("all": every pass); an unknown name is an
  // Error that lists the valid ones.
  std::vector<std::string> print_after;
  // Where the IR goes; std::cerr when null.
  std::ostream* print_to = nullptr;
};

class PassManager {
 public:
  // `verify` is what verification after each pass checks; `times`, when set, receives one
  // row per pass run (its time and the node count after it).
  PassManager(std::vector<Pass> passes, PassOptions options = {}, ir::VerifyOptions verify = {},
              StageTimes* times = nullptr);

  // Runs the enabled passes in order. Checks the print-after names first.
  void run(ir::Model& model) const;

  std::vector<std::string> names() const;

 private:
  void check_print_after() const;
  bool prints_after(const std::string& pass) const;

  std::vector<Pass> passes_;
  PassOptions options_;
  ir::VerifyOptions verify_;
  StageTimes* times_;
};

// The header line printed before the IR after pass `pass`.
std::string print_after_header(const std::string& pass);

}  // namespace ampc::compiler
