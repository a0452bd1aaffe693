// Graceful interruption of `ampc train`: while an InterruptGuard lives, the first SIGINT or
// SIGTERM only sets a flag that the training loop reads after each step (it finishes the
// step, writes the checkpoint and says how to resume); a second one ends the process at once.
#pragma once

#include <string>

namespace ampc::cli {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handlers of SIGINT and SIGTERM
  ~InterruptGuard();  // restores the previous handlers
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // The signal received since the guard was made (SIGINT or SIGTERM), or 0.
  static int signal_received();
};

// "SIGINT", "SIGTERM".
std::string signal_name(int sig);

// The shell's status for a process ended by `sig`: 128 + sig (130 for SIGINT, 143 for
// SIGTERM).
inline int interrupted_exit_code(int sig) {
  return 128 + sig;
}

// Flushes stdout and stderr and ends the process with interrupted_exit_code(sig) without
// running destructors of static objects (the training state is already on disk; the
// executor's worker threads are not joined by anything that could still block).
[[noreturn]] void exit_interrupted(int sig);

}  // namespace ampc::cli

namespace ampc::cli {

// What `ampc train` prints when a signal stopped it after `step` (of `last`): where the
// checkpoint is and the options that resume the run, or that there is none to resume from.
std::string interrupted_message(int sig, long long step, long long last,
                                const std::string& checkpoint);

}  // namespace ampc::cli
