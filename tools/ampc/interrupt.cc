#include "tools/ampc/interrupt.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>

namespace ampc::cli {
namespace {

volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_previous_int, g_previous_term;

void on_signal(int sig) {
  if (g_signal != 0) {
    // The second signal: the user does not want to wait for the step. Only async-signal-safe
    // calls here (write, _exit).
    static const char kMessage[] = "\nampc: second signal: stopping now, without a checkpoint\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
    ::_exit(interrupted_exit_code(sig));
  }
  g_signal = sig;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads and writes of the step go on after the handler
  ::sigaction(SIGINT, &action, &g_previous_int);
  ::sigaction(SIGTERM, &action, &g_previous_term);
}

InterruptGuard::~InterruptGuard() {
  ::sigaction(SIGINT, &g_previous_int, nullptr);
  ::sigaction(SIGTERM, &g_previous_term, nullptr);
}

int InterruptGuard::signal_received() {
  return g_signal;
}

std::string signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(sig);
}

void exit_interrupted(int sig) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(interrupted_exit_code(sig));
}

}  // namespace ampc::cli

namespace ampc::cli {

std::string interrupted_message(int sig, long long step, long long last,
                                const std::string& checkpoint) {
  std::string m = "ampc: " + signal_name(sig) + ": stopped after step " + std::to_string(step) +
                  " of " + std::to_string(last);
  if (checkpoint.empty()) {
    return m + "; no checkpoint written (give --checkpoint FILE to be able to resume)";
  }
  m += "; checkpoint written to " + checkpoint;
  if (step < last) {
    m += "; to resume, run the same command with --resume " + checkpoint + " --steps " +
         std::to_string(last - step);
  }
  return m;
}

}  // namespace ampc::cli
