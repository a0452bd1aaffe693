// Training progress on stderr: on a terminal, one line redrawn in place with a bar, the
// mean loss since the last redraw, throughput and the time left (at most ten redraws a
// second); otherwise (a log file, CI) a plain line every `every` steps.
#pragma once

#include <chrono>
#include <cstdint>

namespace ampc::cli {

class Progress {
 public:
  // Steps first_step+1 .. last_step will be reported; `batch` samples per step.
  Progress(int64_t first_step, int64_t last_step, int64_t every, int64_t batch, bool terminal);
  void step_done(int64_t step, double loss);
  // Ends the bar's line on a terminal (at the end, or before other output; the bar then
  // goes on on a new line).
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  void print(int64_t step);

  int64_t first_, last_, every_, batch_;
  bool terminal_;
  Clock::time_point start_, last_print_;
  double loss_sum_ = 0;
  int64_t loss_count_ = 0;
  bool open_line_ = false;
};

}  // namespace ampc::cli
